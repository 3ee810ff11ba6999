"""The example site without a browser: the demo user command, sign-in, the chat route under
session authentication (CSRF enforced), and the owner's recovery endpoints.

A real daphne process serves ``example_project.asgi:application``; requests go through
httpx with the session cookie a sign-in sets, as the page's own fetches do.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import httpx
import pytest
from django.core.management import call_command
from httpx_sse import connect_sse

from example_project.chat.management.commands.demo_user import Command as DemoUserCommand
from helix_django.models import Message, Run
from tests.browser.conftest import make_user, site_server
from tests.browser.pages import expected_reply

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@contextlib.contextmanager
def signed_in_client(site, user, password) -> Iterator[httpx.Client]:
    """Sign in through the login form; yield a client holding the session and CSRF cookies."""
    with httpx.Client(base_url=site.base_url, timeout=30) as client:
        page = client.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        answer = client.post(
            "/accounts/login/",
            data={"username": user.get_username(), "password": password, "csrfmiddlewaretoken": token},
        )
        assert answer.status_code == 302
        yield client


def send_body(session_id: str, text: str, message_id: str = "msg_test_1") -> dict:
    return {
        "id": session_id,
        "messages": [{"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}],
        "trigger": "submit-message",
    }


def stream_chunks(client: httpx.Client, session_id: str, body: dict, headers: dict) -> tuple[list, list]:
    """POST a send; return ``(sse ids, chunks)`` read to the end of the response."""
    ids, chunks = [], []
    url = f"/helix/api/sessions/{session_id}/chat"
    # connect_sse adds Accept: text/event-stream to the dict it is given: pass a copy.
    with connect_sse(client, "POST", url, json=body, headers=dict(headers)) as events:
        assert events.response.status_code == 200, events.response.read()
        for event in events.iter_sse():
            if not event.data:
                continue  # a keep-alive's blank line, which httpx-sse dispatches once an id was seen
            if event.data == "[DONE]":
                break
            ids.append(event.id)
            chunks.append(event.json())
    return ids, chunks


def test_demo_user_command_prints_credentials_once(capsys):
    call_command(DemoUserCommand())
    first = capsys.readouterr().out
    password = re.search(r"password: (\S+)", first).group(1)
    from django.contrib.auth import authenticate

    user = authenticate(username="demo", password=password)
    assert user is not None and user.is_staff and not user.is_superuser
    assert user.has_perm("helix_django.view_run") and user.has_perm("helix_django.reconcile_run")

    call_command(DemoUserCommand())
    second = capsys.readouterr().out
    assert password not in second and "exists" in second

    call_command(DemoUserCommand(), "--reset")
    third = capsys.readouterr().out
    new_password = re.search(r"password: (\S+)", third).group(1)
    assert new_password != password and authenticate(username="demo", password=new_password) is not None


def test_chat_page_requires_sign_in_and_links_the_admin_for_staff(site):
    anonymous = httpx.get(site.url("/"), follow_redirects=False)
    assert anonymous.status_code == 302 and anonymous.headers["location"].startswith("/accounts/login/")

    user, password = make_user(staff=True)
    with signed_in_client(site, user, password) as client:
        page = client.get("/", follow_redirects=True)
        assert re.search(r"/c/s_[0-9a-f]{32}/$", str(page.url))
        assert 'data-testid="admin-link"' in page.text
        assert client.get("/static/helix_django/client.js").status_code == 200
        assert client.get("/c/not%20an%20id/").status_code == 404

    plain, plain_password = make_user()
    with signed_in_client(site, plain, plain_password) as client:
        assert 'data-testid="admin-link"' not in client.get("/", follow_redirects=True).text


def test_chat_route_takes_a_session_authenticated_json_send_with_csrf_only(site):
    user, password = make_user()
    with signed_in_client(site, user, password) as client:
        body = send_body("s_csrf_check", "Hello over session auth")
        refused = client.post("/helix/api/sessions/s_csrf_check/chat", json=body)
        assert refused.status_code == 403
        assert refused.json()["cause"] == "csrf"
        assert not Run.objects.filter(session_id="s_csrf_check").exists()

        csrf = {"X-CSRFToken": client.cookies["csrftoken"], "X-Helix-Request-Key": "rk_session_auth_1"}
        ids, chunks = stream_chunks(client, "s_csrf_check", body, csrf)
        assert chunks[0]["type"] == "start" and chunks[-1]["type"] == "finish"
        sequences = [int(i) for i in ids]
        assert sequences == sorted(set(sequences))
        text = "".join(c.get("delta", "") for c in chunks if c["type"] == "text-delta")
        assert text == expected_reply("Hello over session auth")
        committed = Message.objects.get(session_id="s_csrf_check", role="assistant", position__isnull=False)
        assert committed.text == text


def test_owner_recovery_endpoints_keep_discard_and_refuse_others(daphne_server_factory):
    site = site_server(daphne_server_factory, provider={"FAIL_AT_FRACTION": 0.5})
    user, password = make_user()
    with signed_in_client(site, user, password) as client:
        headers = {"X-CSRFToken": client.cookies["csrftoken"], "X-Helix-Request-Key": "rk_recovery_1"}
        _, chunks = stream_chunks(client, "s_recover", send_body("s_recover", "Fail half way"), headers)
        assert chunks[-1]["type"] == "error"
        run = Run.objects.get(session_id="s_recover")
        assert run.status == "failed"
        base = f"/helix/api/sessions/s_recover/runs/{run.id}"

        state = client.get(f"{base}/recovery").json()
        assert state["status"] == "failed" and state["recoveryAction"] == ""
        assert {name: a["available"] for name, a in state["actions"].items()} == {
            "regenerate": True,
            "continue": True,
            "keep": True,
            "discard": True,
            "check_status": False,
        }
        assert state["actions"]["check_status"]["reason"]

        kept = client.post(f"{base}/keep", headers=headers)
        assert kept.status_code == 200 and kept.json()["outcome"] == "kept"
        state = client.get(f"{base}/recovery").json()
        assert state["recoveryAction"] == "keep_partial" and state["actions"]["keep"]["available"] is False

        discarded = client.post(f"{base}/discard", headers=headers)
        assert discarded.status_code == 200 and discarded.json()["outcome"] == "discarded"
        assert not Message.objects.filter(session_id="s_recover", role="assistant", position__isnull=False).exists()
        again = client.post(f"{base}/discard", headers=headers)
        assert again.status_code == 409 and again.json()["code"] == "state_run_not_actionable"

        no_csrf = client.post(f"{base}/keep")
        assert no_csrf.status_code == 403

    other, other_password = make_user()
    with signed_in_client(site, other, other_password) as client:
        foreign = client.get(f"{base}/recovery")
        assert foreign.status_code == 404 and foreign.json()["code"] == "state_session_not_found"


def test_scripted_provider_options_reach_the_site(daphne_server_factory):
    site = site_server(daphne_server_factory, provider={"TEXT": "Exactly this reply."})
    user, password = make_user()
    with signed_in_client(site, user, password) as client:
        headers = {"X-CSRFToken": client.cookies["csrftoken"]}
        _, chunks = stream_chunks(client, "s_text", send_body("s_text", "anything"), headers)
        assert "".join(c.get("delta", "") for c in chunks if c["type"] == "text-delta") == "Exactly this reply."
