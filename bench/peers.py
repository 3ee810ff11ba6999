"""Peer routes on the bench server: django-eventstream with its database storage (bench-only).

``GET /bench/peers/eventstream?tokens=N&pace=TPS`` is one "run" published through
django-eventstream the way its documentation has a producer do it, next to helix's chat
route on the same rows (sse, capacity): a fresh channel per request; a producer task in the
server sends ``tokens`` timestamped deltas at ``pace`` per second with
``django_eventstream.send_event`` (its ``DjangoModelStorage``: one ``Event`` row saved per
delta, its channel counter moved, the old-event trim query, then its in-process listeners
woken), then ``[DONE]``; the response is django-eventstream's own ``events`` view for that
channel, served by Django's ASGI handler (the site's middleware, no authentication: its
default channel manager lets anyone read). ``send_event`` is synchronous (Django ORM):
it runs through ``sync_to_async``, as an async producer of a Django site would call it.

The view is opened with ``lastEventId=<channel>:0`` (the placeholder event django-eventstream
stores at id 0 of every channel): it reads every stored delta from the first, whether the
producer's first sends came before its first read or after (a reader with no last id starts
at the channel's current id and would skip the deltas already sent, which the bench does
not count against the peer). Read that way, django-eventstream sometimes delivers a delta
twice (an event arriving during its first read makes it read again from the last id it was
opened with, after it has sent that read's events); the clients drop and count those
(``unique``). Each delta's data is the same JSON as the bare route's (``bench.frames``), sent as is.
"""

from __future__ import annotations

import asyncio
import importlib.util
import uuid
from urllib.parse import parse_qs

EVENTS_PATH = "/bench/peers/events/"
"""Where :mod:`bench.urls` mounts django-eventstream's view."""


def eventstream_missing() -> str:
    """Return why django-eventstream cannot be measured here, or '' when it can."""
    if importlib.util.find_spec("django_eventstream") is None:
        return "django-eventstream is not installed (pip install -e '.[bench]')"
    return ""


async def _produce(channel: str, tokens: int, pace: float) -> None:
    from asgiref.sync import sync_to_async
    from django_eventstream import send_event

    from bench.frames import paced_deltas

    send = sync_to_async(send_event)
    async for _sequence, data in paced_deltas(tokens, pace):
        await send(channel, "message", data, json_encode=False)
    await send(channel, "message", "[DONE]", json_encode=False)


_PRODUCERS: set[asyncio.Task] = set()


async def eventstream(scope, receive, send, django_app) -> None:
    """Serve one peer run: start its producer, answer with django-eventstream's view for its channel."""
    query = parse_qs(scope.get("query_string", b"").decode())
    tokens, pace = int(query.get("tokens", ["100"])[0]), float(query.get("pace", ["50"])[0])
    channel = f"bench-{uuid.uuid4().hex[:12]}"
    task = asyncio.ensure_future(_produce(channel, tokens, pace))
    _PRODUCERS.add(task)
    task.add_done_callback(_PRODUCERS.discard)
    view_scope = {
        **scope,
        "path": EVENTS_PATH,
        "raw_path": EVENTS_PATH.encode(),
        "query_string": f"channel={channel}&lastEventId={channel}:0".encode(),
    }
    await django_app(view_scope, receive, send)
