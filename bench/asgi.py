"""ASGI application the e2e section serves with daphne: helix's routes, plus two bare routes.

(The site's own authenticated DRF endpoints, the second baseline, are Django views:
:mod:`bench.views`.)

``/bench/ping`` reads the request body and answers 200 without Django or helix: the
HTTP floor (daphne, loopback and the client) that the chat route's time to first byte
is compared with, for a POST of the same body and headers.
``/bench/sse?tokens=N&pace=TPS`` streams N SSE frames at TPS per second, each carrying
its emission time like :class:`bench.provider.ClockProvider`: the floor of the live SSE
measurement (no persistence, no run).
``/bench/sse?...&store=1`` does the same and first stores each frame in one SQLite transaction
(BEGIN IMMEDIATE, the stream row's head moved, the chunk row inserted, COMMIT: the statements
of helix's group commit for one delta, on the same tables and file, on the event loop like its
inline writes): the floor of any server that stores each delta before it sends it.
``/bench/peers/eventstream?tokens=N&pace=TPS`` is the peer route: the same deltas published through
django-eventstream with its database storage (:mod:`bench.peers`).
``/bench/heap?op=start|read|stop`` drives :mod:`tracemalloc` in this server process (the
opens section's idle-memory row, :func:`heap`): bench-only, never part of helix_django.

Like ``example_project/asgi.py`` (the deployment the README describes), the server sets
the streaming collector thresholds (:mod:`helix_django.tuning`).
"""

import gc
import json
import os
import sqlite3
import tracemalloc
import uuid
from urllib.parse import parse_qs

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")

from django.core.asgi import get_asgi_application as django_asgi_application  # noqa: E402

django_app = django_asgi_application()

from bench import peers  # noqa: E402
from bench.frames import paced_deltas  # noqa: E402
from helix_django.transport.routing import get_asgi_application  # noqa: E402
from helix_django.tuning import tune_gc_for_streaming  # noqa: E402

tune_gc_for_streaming()
helix_app = get_asgi_application(django_app, prefix="helix/api/")


_STORE: dict[str, sqlite3.Connection] = {}


def store_connection() -> sqlite3.Connection:
    """The durable bare route's one SQLite connection (autocommit mode: explicit transactions)."""
    connection = _STORE.get("default")
    if connection is None:
        from django.conf import settings

        connection = sqlite3.connect(settings.DATABASES["default"]["NAME"], isolation_level=None)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.execute("PRAGMA busy_timeout=1000")
        _STORE["default"] = connection
    return connection


def open_bare_stream(connection: sqlite3.Connection) -> str:
    """Insert an active stream row for the durable bare route; return its id."""
    stream_id = f"bench_bare_{uuid.uuid4().hex[:12]}"
    connection.execute(
        "INSERT INTO helix_django_stream (stream_id, status, run_id, head_sequence, claim_epoch, end_status,"
        " created_at, updated_at) VALUES (?, 'active', 'bare', 0, 1, '', datetime('now'), datetime('now'))",
        (stream_id,),
    )
    return stream_id


def store_frame(connection: sqlite3.Connection, stream_id: str, sequence: int, payload: str) -> None:
    """Store one frame's chunk in its own transaction: the head moved, the chunk row inserted."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.execute(
            "UPDATE helix_django_stream SET head_sequence = ? WHERE stream_id = ?", (sequence, stream_id)
        )
        connection.execute(
            "INSERT INTO helix_django_streamchunk (stream_id, sequence, run_id, attempt_id, step, type, payload)"
            " VALUES (?, ?, 'bare', '', 0, 'text-delta', ?)",
            (stream_id, sequence, payload),
        )
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


async def bare_sse(scope, send):
    """Stream timestamped SSE frames at a pace (``store=1``: each stored first; ``spread=0``: the first
    frame at once, not at a random point of the first period), then ``[DONE]``."""
    query = parse_qs(scope.get("query_string", b"").decode())
    tokens, pace = int(query.get("tokens", ["100"])[0]), float(query.get("pace", ["50"])[0])
    connection = store_connection() if query.get("store") == ["1"] else None
    stream_id = open_bare_stream(connection) if connection is not None else ""
    headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    async for sequence, data in paced_deltas(tokens, pace, spread=query.get("spread") != ["0"]):
        if connection is not None:
            store_frame(connection, stream_id, sequence, data)
        body = f"id: {sequence}\ndata: {data}\n\n"
        await send({"type": "http.response.body", "body": body.encode(), "more_body": True})
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


async def heap(scope, send):
    """Answer ``{"tracedBytes": N, "open": {"bare": B, "helix": H, "host": S}}``: the bytes tracemalloc traces now,
    after a full collection, and the requests of each kind the server is serving (the
    section checks the responses it holds are still open on the server's side).

    ``op=start`` starts tracing (only allocations made from then on are counted), ``read``
    reads, ``stop`` stops. Bytes allocated after ``start`` and still alive at ``read`` are
    what the responses opened in between keep (plus this endpoint's own few hundred bytes,
    the same for every route measured). For profiling, ``HELIX_BENCH_HEAP_FRAMES`` (default
    1) sets the frames tracemalloc keeps per allocation and ``HELIX_BENCH_HEAP_DUMP`` a path
    that ``read`` dumps its snapshot to (``tracemalloc.Snapshot.load``; who keeps what).
    """
    op = parse_qs(scope.get("query_string", b"").decode()).get("op", ["read"])[0]
    if op == "start":
        tracemalloc.start(int(os.environ.get("HELIX_BENCH_HEAP_FRAMES", "1")))
    gc.collect()
    if op == "read" and os.environ.get("HELIX_BENCH_HEAP_DUMP"):
        tracemalloc.take_snapshot().dump(os.environ["HELIX_BENCH_HEAP_DUMP"])
    traced = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0
    if op == "stop":
        tracemalloc.stop()
    body = json.dumps({"tracedBytes": traced, "open": dict(OPEN_REQUESTS)}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


OPEN_REQUESTS = {"bare": 0, "helix": 0, "host": 0}
"""Requests being served, by kind: the bare SSE route, helix's routes, the site's own endpoints."""


async def application(scope, receive, send):
    """Serve the bare routes directly; everything else through helix's router."""
    if scope["type"] == "http" and scope["path"] == "/bench/ping":
        while (await receive()).get("more_body"):  # the floor of a POST reads its body too
            pass
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"ok"})
        return
    if scope["type"] == "http" and scope["path"] == "/bench/heap":
        await heap(scope, send)
        return
    if scope["type"] == "http" and scope["path"] == "/bench/peers/eventstream":
        await peers.eventstream(scope, receive, send, django_app)
        return
    kind = "bare" if scope["type"] == "http" and scope["path"] == "/bench/sse" else "helix"
    if scope["type"] == "http" and scope["path"].startswith("/bench/authenticated/"):
        kind = "host"  # the site's own DRF endpoints (bench.views), served by Django through helix's router
    OPEN_REQUESTS[kind] += 1
    try:
        if kind == "bare":
            await bare_sse(scope, send)
        else:
            await helix_app(scope, receive, send)
    finally:
        OPEN_REQUESTS[kind] -= 1
