"""A user past their token budget is refused before the model is called, on every surface that starts a run.

Over a real daphne server (HELIX ``BUDGET_CLASSES`` with the user scope at 100 tokens a day;
the scripted model reports 10 input tokens and one output token per word, 71 per answer):
the first two sends run, the third is a typed 429 ``budget_exceeded`` with ``Retry-After``
that stores nothing, on the chat route (a send, a new chat, a Regenerate) and the WebSocket;
another user's sends are not counted against it. The site scope, anonymous
visitors and the rate format are checked in-process.
"""

from __future__ import annotations

import json

import httpx
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from helix_django.budgets import check_budgets, parse_rate
from helix_django.errors import BudgetExceededError
from helix_django.models import ChatSession, Message, Run
from tests.recovery.factories import InFlight
from tests.transport.conftest import REPLY, agent_settings, chat_url, new_session_id, read_sse, send_body, user_message

pytestmark = [pytest.mark.django_db(transaction=True)]

BUDGETS = {
    "BUDGET_CLASSES": ["helix_django.budgets.UserTokenBudget", "helix_django.budgets.SiteTokenBudget"],
    "BUDGET_RATES": {"user": "100/day", "site": "100000/day"},
}


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker):
    from tests.live import LiveServer

    with django_db_blocker.unblock():
        live = LiveServer(helix={**agent_settings(TEXT=REPLY), **BUDGETS})
        live.start()
    yield live
    live.stop()


def answered(client, server, sid, text):
    result = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message(text)]))
    assert result.status == 200 and result.done, result
    return result


@pytest.mark.slow
def test_the_third_send_is_refused_typed_and_stores_nothing_on_every_surface(server, users):
    sid = new_session_id()
    with httpx.Client(headers=users["a"][1], timeout=10) as client:
        answered(client, server, sid, "one")
        answered(client, server, sid, "two")
        spent = sum(r.usage["inputTokens"] + r.usage["outputTokens"] for r in Run.objects.filter(session_id=sid))
        assert spent >= 100
        stored = Message.objects.filter(session_id=sid).count()

        refused = client.post(chat_url(server, sid), json=send_body(sid, [user_message("three")]))
        assert refused.status_code == 429
        body = refused.json()
        assert (body["code"], body["scope"], body["retryable"]) == ("budget_exceeded", "user", True)
        assert int(refused.headers["Retry-After"]) == body["retryAfterSeconds"] > 3600
        other = new_session_id()  # a new chat of the same user: refused before its session exists
        assert client.post(chat_url(server, other), json=send_body(other, [user_message("x")])).status_code == 429
        assert not ChatSession.objects.filter(pk=other).exists()

        turn = Message.objects.filter(session_id=sid, role="user").latest("position")
        body = {"id": sid, "messages": [{"id": turn.ui_id, "role": "user", "parts": turn.parts}]}
        regenerate = client.post(chat_url(server, sid), json={**body, "trigger": "regenerate-message"})
        assert regenerate.status_code == 429 and regenerate.json()["code"] == "budget_exceeded"

    from websockets.sync.client import connect

    with connect(f"{server.ws_base_url}/ws/helix/api/sessions/{sid}/", additional_headers=users["a"][1]) as ws:
        ws.send(json.dumps({"type": "send", "messages": [user_message("four")]}))
        frame = json.loads(ws.recv(timeout=10))
        assert frame["type"] == "error" and "budget_exceeded" in json.dumps(frame), frame
    assert Message.objects.filter(session_id=sid).count() == stored
    assert Run.objects.filter(session_id=sid).count() == 2

    with httpx.Client(headers=users["b"][1], timeout=10) as client:  # another user's budget is their own
        answered(client, server, new_session_id(), "hello")


def spend(session_id: str, tokens: int, owner=None) -> None:
    flight = InFlight(session_id, owner=owner)
    Run.objects.filter(pk=flight.run_id).update(
        status="completed", usage={"inputTokens": 0, "outputTokens": tokens, "source": "reported"}
    )


def test_the_site_budget_counts_every_users_runs(users):
    spend("s-site-a", 60, owner=users["a"][0])
    spend("s-site-b", 60, owner=users["b"][0])
    with override_settings(HELIX={"BUDGET_CLASSES": BUDGETS["BUDGET_CLASSES"], "BUDGET_RATES": {"site": "100/h"}}):
        with pytest.raises(BudgetExceededError) as refused:
            check_budgets(ChatSession.objects.get(pk="s-site-a"))
    assert refused.value.to_body()["scope"] == "site" and 0 < refused.value.to_body()["retryAfterSeconds"] <= 3600


def test_an_anonymous_visitors_budget_counts_their_owner_tokens_runs():
    for sid, key in (("s-anon-1", "key-1"), ("s-anon-2", "key-1"), ("s-anon-3", "key-2")):
        ChatSession.objects.create(id=sid, anonymous_key=key)
    spend("s-anon-1", 90)
    spend("s-anon-3", 500)
    with override_settings(HELIX={**BUDGETS, "BUDGET_RATES": {"user": "100/d"}}):
        check_budgets(ChatSession.objects.get(pk="s-anon-2"))  # 90 of 100 spent by this visitor
        spend("s-anon-2", 20)
        with pytest.raises(BudgetExceededError):
            check_budgets(ChatSession.objects.get(pk="s-anon-2"))


def test_rates_read_as_tokens_per_period():
    assert parse_rate("200000/day") == (200000, 86400)
    assert parse_rate("50/m") == (50, 60)
    for bad in ("lots/day", "100", "100/fortnight"):
        with pytest.raises(ImproperlyConfigured):
            parse_rate(bad)
