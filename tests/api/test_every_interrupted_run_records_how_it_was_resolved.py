"""Every interrupted or failed run records how it was resolved and by which run, whichever surface did it.

Over daphne with the real chat route and recovery routes. The scripted provider fails half
way through its reply, so each send leaves a failed run with a partial answer: a person
must decide what happens to it (000, "Recovery actions"). The chat page's Regenerate
(``trigger: regenerate-message``), a new message typed after it, the recovery routes'
Continue and Keep each record their resolution (``recovery_action``) and, where a run
followed, its id (``resolved_by``); the run then leaves the admin's "Needs attention" list.
"""

from __future__ import annotations

import pytest

from helix_django.admin.filters import attention_q
from helix_django.models import Run
from tests.api.test_recovery import FIRST, RULES, failed_run, run_url, wait_for
from tests.live import LiveServer
from tests.transport.conftest import agent_settings, chat_url, read_sse, send_body, user_message

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def failing_server(django_db_setup, django_db_blocker):
    """One server per module whose default agent fails half way through every first answer."""
    with django_db_blocker.unblock():
        server = LiveServer(helix=agent_settings(TEXT=FIRST, FAIL_AT_FRACTION=0.5, RULES=RULES)).start()
    yield server
    server.stop()


def _needs_attention(run_id: str) -> bool:
    return Run.objects.filter(attention_q(), pk=run_id).exists()


def _following(sid: str, failed: Run) -> Run:
    return wait_for(
        lambda: Run.objects.filter(session_id=sid, created_at__gt=failed.created_at).exclude(pk=failed.pk).first(),
        "the run that followed",
    )


def test_the_chat_pages_regenerate_records_regenerate_and_the_new_run(failing_server, api):
    a = api("a")
    sid, failed = failed_run(failing_server, a)
    assert _needs_attention(failed.id)
    body = {**send_body(sid, [user_message("Fail half way")]), "trigger": "regenerate-message"}
    answer = read_sse(a, "POST", chat_url(failing_server, sid), json=body)
    assert answer.status == 200
    following = _following(sid, failed)
    assert following.kind == "regenerate"
    resolved = Run.objects.get(pk=failed.id)
    assert (resolved.recovery_action, resolved.resolved_by) == ("regenerate", following.id)
    assert not _needs_attention(failed.id)


def test_a_new_message_after_a_failed_run_records_a_follow_up(failing_server, api):
    a = api("a")
    sid, failed = failed_run(failing_server, a)
    body = send_body(sid, [user_message("Never mind, something else")])
    answer = read_sse(a, "POST", chat_url(failing_server, sid), json=body)
    assert answer.status == 200
    following = _following(sid, failed)
    resolved = Run.objects.get(pk=failed.id)
    assert (resolved.recovery_action, resolved.resolved_by) == ("follow_up", following.id)
    assert not _needs_attention(failed.id)


def test_the_recovery_routes_record_continue_with_its_run_and_keep_without_one(failing_server, api):
    a = api("a")
    sid, failed = failed_run(failing_server, a)
    started = a.post(run_url(failing_server, sid, failed.id, "continue")).json()
    resolved = Run.objects.get(pk=failed.id)
    assert (resolved.recovery_action, resolved.resolved_by) == ("continue", started["newRunId"])

    sid, failed = failed_run(failing_server, a)
    assert a.post(run_url(failing_server, sid, failed.id, "keep")).status_code == 200
    kept = Run.objects.get(pk=failed.id)
    assert (kept.recovery_action, kept.resolved_by) == ("keep_partial", "")
    assert not _needs_attention(failed.id)
