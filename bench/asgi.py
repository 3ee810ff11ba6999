"""ASGI application the e2e section serves with daphne: helix's routes, plus two bare routes.

``/bench/ping`` reads the request body and answers 200 without Django or helix: the
HTTP floor (daphne, loopback and the client) that the chat route's time to first byte
is compared with, for a POST of the same body and headers.
``/bench/sse?tokens=N&pace=TPS`` streams N SSE frames at TPS per second, each carrying
its emission time like :class:`bench.provider.ClockProvider`: the floor of the live SSE
measurement (no persistence, no run).

Like ``example_project/asgi.py`` (the deployment the README describes), the server sets
the streaming collector thresholds (:mod:`helix_django.tuning`).
"""

import asyncio
import os
import time
from urllib.parse import parse_qs

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")

from django.core.asgi import get_asgi_application as django_asgi_application  # noqa: E402

django_app = django_asgi_application()

from helix_django.transport.routing import get_asgi_application  # noqa: E402
from helix_django.tuning import tune_gc_for_streaming  # noqa: E402

tune_gc_for_streaming()
helix_app = get_asgi_application(django_app, prefix="helix/api/")


async def bare_sse(scope, send):
    """Stream timestamped SSE frames at a pace, then ``[DONE]``."""
    query = parse_qs(scope.get("query_string", b"").decode())
    tokens, pace = int(query.get("tokens", ["100"])[0]), float(query.get("pace", ["50"])[0])
    headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    loop = asyncio.get_running_loop()
    started = loop.time()
    for index in range(tokens):
        delay = started + index / pace - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        body = f'id: {index + 1}\ndata: {{"type":"text-delta","id":"t","delta":"{time.perf_counter():.6f} "}}\n\n'
        await send({"type": "http.response.body", "body": body.encode(), "more_body": True})
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


async def application(scope, receive, send):
    """Serve the bare routes directly; everything else through helix's router."""
    if scope["type"] == "http" and scope["path"] == "/bench/ping":
        while (await receive()).get("more_body"):  # the floor of a POST reads its body too
            pass
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"ok"})
        return
    if scope["type"] == "http" and scope["path"] == "/bench/sse":
        await bare_sse(scope, send)
        return
    await helix_app(scope, receive, send)
