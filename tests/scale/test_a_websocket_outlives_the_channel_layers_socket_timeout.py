"""A WebSocket does not die with the channel layer's blocking receive (channels_redis#422).

Found by a new user on the scale-out set-up (seventeenth session): with redis-py 8, whose
``socket_timeout`` defaults to 5 s, the same as channels_redis's blocking ``BZPOPMIN``, a
layer configured as channels_redis's README shows (no ``socket_timeout``) raised
``TimeoutError`` from a consumer's channel receive after 5 s of quiet: helix's WebSocket
consumer died with it (a server closes such a socket 1011). Helix's socket never used that
channel (cross-process wake-ups are the stream manager's broadcast): it no longer opens one,
so it holds no layer connection either. A ``socket_timeout`` of 1 s makes it come within
the test; system check W005 warns of such a layer.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.testing import HttpCommunicator, WebsocketCommunicator
from django.conf import settings
from django.test import Client, override_settings
from rest_framework.authtoken.models import Token

from helix_django import store
from helix_django.conf import helix_settings
from tests.settings import REDIS_URL
from tests.transport.conftest import agent_settings, new_session_id, send_body, user_message

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

WORDS = 60


@pytest.fixture
def short_timeout_layer():
    layer = {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 1}], "prefix": f"helix-test-{uuid.uuid4().hex}"},
    }
    helix = {
        **helix_settings.user_settings,
        **agent_settings(TEXT=" ".join(f"w{i}" for i in range(WORDS)), PACE_TPS=20),
    }
    with override_settings(CHANNEL_LAYERS={"default": layer}, HELIX=helix):
        yield


async def test_a_socket_follows_a_run_longer_than_the_layers_socket_timeout(short_timeout_layer, django_user_model):
    from tests.asgi import application

    user = await sync_to_async(django_user_model.objects.create_user)(username=f"ws-{uuid.uuid4().hex[:8]}")

    def login_cookie() -> bytes:
        client = Client()
        client.force_login(user)
        return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()

    cookie = (b"cookie", await sync_to_async(login_cookie)())
    token = await sync_to_async(Token.objects.create)(user=user)
    auth = (b"authorization", f"Token {token.key}".encode())
    sid = new_session_id()
    await sync_to_async(store.get_or_create_session)(sid, owner_id=user.pk)
    # Connected first: a consumer with a layer channel of its own would hold the process's blocking
    # receive on the layer (channels_redis shares one per process) and meet its timeout there.
    socket = WebsocketCommunicator(application, f"/ws/helix/api/sessions/{sid}/", headers=[cookie])
    connected, _ = await socket.connect()
    assert connected
    await asyncio.sleep(0.2)
    body = json.dumps(send_body(sid, [user_message("hi")])).encode()
    path = f"/helix/api/sessions/{sid}/chat"
    send = HttpCommunicator(
        application, "POST", path, body=body, headers=[auth, (b"content-type", b"application/json")]
    )
    sending = asyncio.ensure_future(send.get_response(timeout=30))
    await socket.send_json_to({"type": "resume", "from_sequence": 0})
    frames = []
    while not frames or frames[-1]["type"] == "chunk":
        frames.append(await socket.receive_json_from(timeout=10))
    await asyncio.sleep(1.5)  # idle longer than the layer's socket timeout: nothing is published now
    # Under a server a consumer that raised is a socket closed 1011; its reader task alone went on here.
    assert not socket.future.done(), socket.future.exception()
    await socket.disconnect()
    assert (await sending)["status"] == 200
    assert frames[-1] == {**frames[-1], "type": "end", "status": "completed"}, frames[-1]
    text = "".join(f["chunk"].get("delta", "") for f in frames if f["type"] == "chunk")
    assert text == " ".join(f"w{i}" for i in range(WORDS))
