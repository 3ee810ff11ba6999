"""ASGI application the e2e section serves with daphne: helix's routes, plus a bare ping.

``/bench/ping`` answers 200 without Django or helix: the HTTP floor (daphne, loopback
and the client) that the chat route's time to first byte is compared with.
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")

from django.core.asgi import get_asgi_application as django_asgi_application  # noqa: E402

django_app = django_asgi_application()

from helix_django.transport.routing import get_asgi_application  # noqa: E402

helix_app = get_asgi_application(django_app, prefix="helix/api/")


async def application(scope, receive, send):
    """Serve ``/bench/ping`` directly; everything else through helix's router."""
    if scope["type"] == "http" and scope["path"] == "/bench/ping":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"ok"})
        return
    await helix_app(scope, receive, send)
