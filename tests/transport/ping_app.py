"""A tiny ASGI app that reports its pid and database path (used by test_live)."""

import json
import os


async def application(scope, receive, send):
    """Answer every HTTP request with ``{"pid", "sqlite"}``; accept lifespan."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = json.dumps({"pid": os.getpid(), "sqlite": os.environ.get("HELIX_SQLITE_PATH")}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})
