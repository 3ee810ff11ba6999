"""Exactly-once for keyed retries after drops, and for concurrent C-1 prefix resumes of a live run."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from helix_django.models import Message, Run
from helix_django.protocol import MessageAccumulator
from tests.adversarial.conftest import wait_idle
from tests.transport.conftest import (
    REPLY,
    chat_url,
    new_session_id,
    read_sse,
    send_body,
    user_message,
)

pytestmark = [pytest.mark.django_db(transaction=True)]


def render(chunks, message_id):
    acc = MessageAccumulator(message_id)
    for chunk in chunks:
        if chunk.get("type") == "start":
            acc = MessageAccumulator(chunk.get("messageId") or message_id)  # the AI SDK resets on start
        acc.apply(chunk)
    return "".join(p.get("text", "") for p in acc.snapshot()["parts"] if p["type"] == "text")


def test_keyed_retries_after_drops_stream_the_one_run_from_its_start(slow_server, users):
    sid = new_session_id()
    body = send_body(sid, [user_message("hi", "u_keyed")])
    headers = {**users["a"][1], "X-Helix-Request-Key": "retry-key-0001"}
    with httpx.Client(headers=headers, timeout=20) as client:
        for drop_after in (2, 9, 30):
            dropped = read_sse(client, "POST", chat_url(slow_server, sid), json=body, stop_after=drop_after)
            assert dropped.status == 200
        final = read_sse(client, "POST", chat_url(slow_server, sid), json=body)
        assert final.status == 200 and final.done
        assert final.text == REPLY
        after_end = read_sse(client, "POST", chat_url(slow_server, sid), json=body)
    assert Run.objects.filter(session_id=sid).count() == 1
    assert Message.objects.filter(session_id=sid, role="user").count() == 1
    if after_end.status == 200:
        assert after_end.text == REPLY and after_end.done
    else:
        assert after_end.status == 204


def test_concurrent_prefix_resumes_each_rebuild_the_whole_message_once(slow_server, users):
    sid = new_session_id()
    with httpx.Client(headers=users["a"][1], timeout=20) as client:
        head = read_sse(
            client, "POST", chat_url(slow_server, sid), json=send_body(sid, [user_message("hi")]), stop_after=3
        )
        assert head.status == 200
        run = Run.objects.get(session_id=sid)

        def resume(i):
            time.sleep(i * 0.1)
            with httpx.Client(headers=users["a"][1], timeout=20) as c:
                return read_sse(
                    c,
                    "GET",
                    chat_url(slow_server, sid),
                    headers={"X-Existing-Message-Id": run.response_message_id, "X-Helix-Replay-Prefix": "1"},
                )

        with ThreadPoolExecutor(max_workers=12) as pool:
            results = list(pool.map(resume, range(12)))
        wait_idle(client, slow_server, sid)
    for result in results:
        assert result.status == 200, (result.status, result.body)
        assert result.done
        assert render(result.chunks, run.response_message_id) == REPLY
