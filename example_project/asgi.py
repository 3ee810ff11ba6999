"""ASGI entry point of the example site: HTTP and WebSocket through Channels, served by daphne.

daphne example_project.asgi:application
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
# Django must be set up before anything imports models (the routing below does).
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402
from helix_django.transport.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        # daphne serves no static files itself; the example serves the JS client and CSS
        # through Django's static files handler (behind nginx, let nginx serve STATIC_ROOT).
        "http": ASGIStaticFilesHandler(django_asgi_app),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
