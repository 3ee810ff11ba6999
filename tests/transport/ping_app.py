"""A tiny ASGI app that reports its pid and the database it was pointed at (used by test_live)."""

import json
import os


async def application(scope, receive, send):
    """Answer every HTTP request with ``{"pid", "database"}`` (the database the server was pointed at); accept lifespan."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    database = os.environ.get("HELIX_SQLITE_PATH") or os.environ.get("HELIX_TEST_DATABASE_URL")
    body = json.dumps({"pid": os.getpid(), "database": database}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})
