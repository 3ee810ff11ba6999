"""A client's close is answered at once, whether the socket follows a live run, replays a long one or idles.

A tester saw a WebSocket that followed a live run take 10 s to close (the client's
``close_timeout``) on one daphne process. Measured here (websockets 17.4 clients, a raw
socket client, daphne 4.2.3 and uvicorn): the server is not the cause. It answers the
client's close frame with its own and drops the TCP connection within 15 ms in every case,
daphne's send paused by backpressure included (the data frames already on the wire arrive
first, then the close frame). The 10 s comes from the websockets client itself: once
``max_queue`` (default 16) messages wait unread, its reader stops reading the socket, so it
never reads the server's close frame and ``close()`` gives up after ``close_timeout``.
The result was 10.0 s on daphne and on uvicorn alike, with the sync and the asyncio client,
following a live run or replaying a finished one. With ``max_queue=None``, or a client that
read what it had received, the close took 1-6 ms. Its maintainer calls this timeout correct
(python-websockets/websockets#1555). The clients below read everything they receive
(``max_queue=None``), so a close that takes longer than :data:`PROMPT_SECONDS` is the server's.

What helix promises about a close (docs/transport.md, "Routes"): it stops this socket's reader
and the consumer at once, and never the run, which goes on to its end.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.test import Client, override_settings
from websockets.sync.client import connect

from helix_django import store
from helix_django.models import Message, Run, RunStatus
from helix_django.runtime.executor import get_executor
from tests.runtime.conftest import agent, helix
from tests.transport.conftest import PREFIX, agent_settings, new_session_id, user_message
from tests.transport.test_a_reader_that_never_reads_holds_bounded_server_memory import big_finished_stream

pytestmark = [pytest.mark.django_db(transaction=True)]

PROMPT_SECONDS = 2.0
"""A close answered later than this was not answered by the server (the client gives up after 10 s)."""
LONG_REPLY = " ".join(f"word{i}" for i in range(400))
PACE_TPS = 100
"""Words per second of the live run: LONG_REPLY streams for 4 s, well past the close."""
UNREAD_SECONDS = 0.5
"""How long the client lets frames arrive unread before it closes (about 50 of the live run's)."""
SERVERS = ["daphne", "uvicorn"]


def login_cookie(user) -> dict[str, str]:
    client = Client()
    client.force_login(user)
    return {"Cookie": f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"}


def open_socket(server, session_id: str, user):
    """A websockets client that reads everything it receives (``max_queue=None``: see the module docstring)."""
    url = f"{server.ws_base_url}/ws{PREFIX}/sessions/{session_id}/"
    return connect(url, additional_headers=login_cookie(user), max_queue=None, close_timeout=10)


def close_and_time(ws) -> float:
    """Close ``ws``; return the seconds the closing handshake took; assert the server's close frame (1000) was read."""
    started = time.monotonic()
    ws.close()
    elapsed = time.monotonic() - started
    answer = ws.protocol.close_rcvd
    assert answer is not None and answer.code == 1000, f"after {elapsed:.2f} s, no close frame of the server was read"
    return elapsed


def wait_for_status(run_id: str, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while (status := Run.objects.get(pk=run_id).status) == RunStatus.STREAMING and time.monotonic() < deadline:
        time.sleep(0.05)
    return status


@pytest.mark.slow
@pytest.mark.parametrize("server_name", SERVERS)
def test_a_close_while_following_a_live_run_is_answered_at_once_and_the_run_goes_on(
    daphne_server_factory, users, server_name
):
    server = daphne_server_factory(helix=agent_settings(TEXT=LONG_REPLY, PACE_TPS=PACE_TPS), server=server_name)
    user, headers = users["a"]
    sid = new_session_id()
    assert httpx.post(server.url(f"{PREFIX}/sessions/"), json={"id": sid}, headers=headers).status_code == 201
    with open_socket(server, sid, user) as ws:
        ws.send(json.dumps({"type": "send", "messages": [user_message("hello")]}))
        run = json.loads(ws.recv(timeout=10))
        assert run["type"] == "run"
        for _ in range(10):
            assert json.loads(ws.recv(timeout=10))["type"] == "chunk"
        time.sleep(UNREAD_SECONDS)
        elapsed = close_and_time(ws)
    assert elapsed < PROMPT_SECONDS, f"closing a socket following a live run took {elapsed:.2f} s"
    assert Run.objects.get(pk=run["runId"]).status == RunStatus.STREAMING  # closed while live
    assert wait_for_status(run["runId"]) == RunStatus.COMPLETED  # a closed reader never stops its run
    assert Message.objects.get(session_id=sid, role="assistant").text == LONG_REPLY


@pytest.mark.slow
@pytest.mark.parametrize("server_name", SERVERS)
def test_a_close_during_the_replay_of_a_long_finished_run_is_answered_at_once(
    daphne_server_factory, users, server_name
):
    server = daphne_server_factory(server=server_name)
    user, _headers = users["a"]
    sid = big_finished_stream(user.pk)  # 8 MB: the replay is far from sent when the client closes
    with open_socket(server, sid, user) as ws:
        ws.send(json.dumps({"type": "resume", "from_sequence": 0}))
        for _ in range(10):
            assert json.loads(ws.recv(timeout=10))["type"] == "chunk"
        time.sleep(UNREAD_SECONDS)
        elapsed = close_and_time(ws)
    assert elapsed < PROMPT_SECONDS, f"closing a socket during a long replay took {elapsed:.2f} s"


@pytest.mark.slow
@pytest.mark.parametrize("server_name", SERVERS)
def test_a_close_of_an_idle_socket_is_answered_at_once(daphne_server_factory, users, server_name):
    server = daphne_server_factory(server=server_name)
    user, headers = users["a"]
    sid = new_session_id()
    assert httpx.post(server.url(f"{PREFIX}/sessions/"), json={"id": sid}, headers=headers).status_code == 201
    with open_socket(server, sid, user) as ws:
        time.sleep(0.2)
        elapsed = close_and_time(ws)
    assert elapsed < PROMPT_SECONDS, f"closing an idle socket took {elapsed:.2f} s"


def is_a_reader(task: asyncio.Task) -> bool:
    return not task.done() and task.get_coro().__qualname__ == "SessionStreamConsumer._stream"


@pytest.mark.asyncio
async def test_the_consumer_ends_its_reader_and_itself_on_a_disconnect_and_leaves_the_run_running(users):
    """In process, the ASGI ``websocket.disconnect`` daphne sends once the socket closed: the consumer
    returns within the communicator's 1 s, with no reader task left; the run completes."""
    from channels.testing import WebsocketCommunicator

    from tests.asgi import application

    user, _headers = users["a"]
    sid = new_session_id()
    with override_settings(HELIX=helix(default=agent({"TEXT": LONG_REPLY, "PACE_TPS": PACE_TPS}))):
        await store.aget_or_create_session(sid, owner_id=user.pk)
        cookie = (await sync_to_async(login_cookie)(user))["Cookie"].encode()
        ws = WebsocketCommunicator(application, f"/ws{PREFIX}/sessions/{sid}/", headers=[(b"cookie", cookie)])
        connected, _ = await ws.connect()
        assert connected
        await ws.send_json_to({"type": "send", "messages": [user_message("hello")]})
        run = await ws.receive_json_from(timeout=10)
        assert run["type"] == "run"
        for _ in range(5):
            assert (await ws.receive_json_from(timeout=10))["type"] == "chunk"
        assert [t for t in asyncio.all_tasks() if is_a_reader(t)]
        await ws.disconnect()  # raises TimeoutError if the consumer did not return within 1 s
        assert not [t for t in asyncio.all_tasks() if is_a_reader(t)]
        assert (await Run.objects.aget(pk=run["runId"])).status == RunStatus.STREAMING
        await get_executor().wait(run["runId"], 30)
        assert (await Run.objects.aget(pk=run["runId"])).status == RunStatus.COMPLETED
