"""An owner's recovery endpoints over daphne: inventory, Keep, Discard, Continue, Regenerate, Check status, refusals.

The scripted provider fails half way through its reply (a partial answer, run ``failed``);
a user text containing "slow" streams at 5 tokens/s instead (a live run); Continue's
prompt ("Continue your previous answer ...") completes.
"""

from __future__ import annotations

import time

import httpx
import pytest
from asgiref.sync import async_to_sync

from helix_django.models import ChatSession, Message, Run, RunStatus, ToolExecution
from helix_django.recovery.actions import aresolve_tool
from tests.live import LiveServer
from tests.transport.conftest import PREFIX, agent_settings, chat_url, new_session_id, read_sse, send_body, user_message

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FIRST = "The first half of this answer arrives and then the provider fails before the end of it."
REST = "and here is the rest of the answer."
NO_OPERATION = "The provider never returned an operation id for this generation."
RULES = [
    {"MATCH": "^Continue your previous answer", "TEXT": REST, "FAIL_AT_FRACTION": None},
    {"MATCH": "slow", "FAIL_AT_FRACTION": None, "PACE_TPS": 5},
]


@pytest.fixture(scope="module")
def failing_server(django_db_setup, django_db_blocker):
    """One server per module whose default agent fails half way through ``FIRST``."""
    with django_db_blocker.unblock():
        server = LiveServer(helix=agent_settings(TEXT=FIRST, FAIL_AT_FRACTION=0.5, RULES=RULES)).start()
    yield server
    server.stop()


def run_url(server, sid: str, run_id: str, action: str) -> str:
    return server.url(f"{PREFIX}/sessions/{sid}/runs/{run_id}/{action}")


def wait_for(predicate, what: str, seconds: float = 10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def failed_run(server, client: httpx.Client, text: str = "Fail half way") -> tuple[str, Run]:
    """Send ``text`` in a new session; return the session id and its failed run (a partial answer kept)."""
    sid = new_session_id()
    sent = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message(text)]))
    assert sent.status == 200 and sent.chunks[-1]["type"] == "error"
    run = wait_for(lambda: Run.objects.filter(session_id=sid, status=RunStatus.FAILED).first(), "the failed run")
    return sid, run


def assistant_rows(sid: str) -> list[Message]:
    return list(Message.objects.filter(session_id=sid, role="assistant", position__isnull=False))


def availability(client: httpx.Client, server, sid: str, run_id: str) -> dict[str, bool]:
    body = client.get(run_url(server, sid, run_id, "recovery")).json()
    return {name: offer["available"] for name, offer in body["actions"].items()}


def test_inventory_then_keep_then_discard(failing_server, api):
    a = api("a")
    sid, run = failed_run(failing_server, a)
    got = a.get(run_url(failing_server, sid, run.id, "recovery"))
    assert got.status_code == 200
    body = got.json()
    assert body["runId"] == run.id and body["status"] == "failed" and body["recoveryAction"] == ""
    assert body["actions"] == {
        **{name: {"available": True, "reason": ""} for name in ("regenerate", "continue", "keep", "discard")},
        "check_status": {"available": False, "reason": NO_OPERATION},
    }
    refused = a.post(run_url(failing_server, sid, run.id, "check_status"))
    assert refused.status_code == 409
    assert refused.json()["cause"] == "check_status" and refused.json()["error"] == NO_OPERATION
    partial = assistant_rows(sid)
    assert len(partial) == 1 and partial[0].text and FIRST.startswith(partial[0].text.strip())

    kept = a.post(run_url(failing_server, sid, run.id, "keep"))
    assert kept.status_code == 200
    assert kept.json() == {"action": "keep", "runId": run.id, "outcome": "kept", "newRunId": ""}
    assert Run.objects.get(pk=run.id).recovery_action == "keep_partial"
    assert [m.text for m in assistant_rows(sid)] == [partial[0].text]
    after = a.get(run_url(failing_server, sid, run.id, "recovery")).json()
    assert after["recoveryAction"] == "keep_partial"
    assert after["actions"]["keep"] == {"available": False, "reason": "The partial output is already kept."}
    again = a.post(run_url(failing_server, sid, run.id, "keep"))
    assert again.status_code == 409
    assert again.json()["code"] == "state_run_not_actionable" and again.json()["cause"] == "keep_partial"

    discarded = a.post(run_url(failing_server, sid, run.id, "discard"))
    assert discarded.status_code == 200 and discarded.json()["outcome"] == "discarded"
    assert assistant_rows(sid) == []
    assert Run.objects.get(pk=run.id).recovery_action == "discard_partial"
    assert availability(a, failing_server, sid, run.id) == {
        "regenerate": True,
        "continue": False,
        "keep": False,
        "discard": False,
        "check_status": False,
    }
    refused = a.post(run_url(failing_server, sid, run.id, "discard"))
    assert refused.status_code == 409 and refused.json()["cause"] == "discard_partial"
    assert refused.json()["error"] == "There is no partial output in the conversation."


def test_continue_starts_a_new_run_from_the_partial_answer(failing_server, api):
    a = api("a")
    sid, run = failed_run(failing_server, a)
    answer = a.post(run_url(failing_server, sid, run.id, "continue"))
    assert answer.status_code == 200
    body = answer.json()
    assert body["action"] == "continue" and body["runId"] == run.id and body["outcome"] == "started"
    new_run = Run.objects.get(pk=body["newRunId"])
    assert new_run.kind == "continue" and new_run.session_id == sid
    wait_for(lambda: Run.objects.get(pk=new_run.id).status == RunStatus.COMPLETED, "the continuation to complete")
    assert ChatSession.objects.get(pk=sid).current_run_id == new_run.id
    assert Run.objects.get(pk=run.id).recovery_action == "continue"
    assert REST in "".join(m.text for m in assistant_rows(sid))
    # The old run is no longer its session's current run: nothing applies to it any more.
    assert availability(a, failing_server, sid, run.id) == dict.fromkeys(
        ("regenerate", "continue", "keep", "discard", "check_status"), False
    )
    late = a.post(run_url(failing_server, sid, run.id, "continue"))
    assert late.status_code == 409 and late.json()["code"] == "state_run_not_actionable"


def test_regenerate_starts_a_new_attempt_at_the_turn(failing_server, api):
    a = api("a")
    sid, run = failed_run(failing_server, a)
    answer = a.post(run_url(failing_server, sid, run.id, "regenerate"))
    assert answer.status_code == 200
    body = answer.json()
    assert body["action"] == "regenerate" and body["outcome"] == "started" and body["newRunId"] != run.id
    new_run = Run.objects.get(pk=body["newRunId"])
    assert new_run.kind == "regenerate"
    assert ChatSession.objects.get(pk=sid).current_run_id == new_run.id
    assert Run.objects.get(pk=run.id).recovery_action == "regenerate"
    # The scripted reply fails again half way: the new attempt is a recoverable run of its own.
    wait_for(lambda: Run.objects.get(pk=new_run.id).status == RunStatus.FAILED, "the new attempt to end")
    assert availability(a, failing_server, sid, new_run.id)["regenerate"] is True


def test_a_live_run_refuses_every_action_with_a_typed_409(failing_server, api):
    a = api("a")
    sid = new_session_id()
    read_sse(a, "POST", chat_url(failing_server, sid), json=send_body(sid, [user_message("slow please")]), stop_after=3)
    run = wait_for(lambda: Run.objects.filter(session_id=sid).first(), "the live run")
    assert Run.objects.get(pk=run.id).is_live
    inventory = a.get(run_url(failing_server, sid, run.id, "recovery")).json()
    assert inventory["status"] in ("starting", "streaming")
    for name, offer in inventory["actions"].items():
        assert offer["available"] is False, name
        if name != "check_status":
            assert offer["reason"] == "The generation has not ended; mark it interrupted or cancel it first."
    assert inventory["actions"]["check_status"]["reason"] == NO_OPERATION
    for action, cause in (("regenerate", "regenerate"), ("continue", "continue"), ("keep", "keep_partial")):
        refused = a.post(run_url(failing_server, sid, run.id, action))
        assert refused.status_code == 409, action
        assert refused.json()["code"] == "state_run_not_actionable" and refused.json()["cause"] == cause
    assert Run.objects.get(pk=run.id).recovery_action == ""
    assert a.post(run_url(failing_server, sid, run.id, "cancel")).status_code == 200


def test_another_owner_gets_404_and_changes_nothing(failing_server, api):
    a, b = api("a"), api("b")
    sid, run = failed_run(failing_server, a)
    for method, action in (("GET", "recovery"), ("POST", "keep"), ("POST", "discard"), ("POST", "regenerate")):
        foreign = b.request(method, run_url(failing_server, sid, run.id, action))
        assert foreign.status_code == 404 and foreign.json()["code"] == "state_session_not_found", action
    assert Run.objects.get(pk=run.id).recovery_action == ""
    assert len(assistant_rows(sid)) == 1
    unknown = a.get(run_url(failing_server, sid, "run_does_not_exist", "recovery"))
    assert unknown.status_code == 404 and unknown.json()["code"] == "state_run_not_found"


def test_a_side_effecting_tool_with_unknown_outcome_blocks_continue_and_regenerate(failing_server, api):
    a = api("a")
    sid, run = failed_run(failing_server, a)
    execution = ToolExecution.objects.create(
        run=run, tool_call_id="call_mail", name="send_email", arguments={}, effect="side_effect", status="unknown"
    )
    inventory = a.get(run_url(failing_server, sid, run.id, "recovery")).json()
    for action in ("regenerate", "continue"):
        offer = inventory["actions"][action]
        assert offer["available"] is False
        assert "send_email" in offer["reason"] and "outcome is unknown" in offer["reason"]
        refused = a.post(run_url(failing_server, sid, run.id, action))
        assert refused.status_code == 409
        error = refused.json()
        assert error["code"] == "state_run_not_actionable" and error["cause"] == action
        assert error["error"] == offer["reason"]
    assert inventory["actions"]["keep"]["available"] is True  # keeping the text runs nothing
    assert Run.objects.filter(session_id=sid).count() == 1

    async_to_sync(aresolve_tool)(execution.pk, executed=False)
    assert availability(a, failing_server, sid, run.id)["continue"] is True


def test_the_schema_describes_the_recovery_routes(failing_server, api):
    schema = api("a").get(failing_server.url(f"{PREFIX}/schema/"), headers={"Accept": "application/json"})
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    base = f"{PREFIX.lstrip('/')}/sessions/{{session_id}}/runs/{{run_id}}/"
    keys = {key.lstrip("/") for key in paths}
    for action in ("recovery", "regenerate", "continue", "keep", "discard", "check_status"):
        assert f"{base}{action}" in keys, action
    components = schema.json()["components"]["schemas"]
    assert set(components["RecoveryInventory"]["properties"]) == {"runId", "status", "recoveryAction", "actions"}
    assert set(components["RecoveryActions"]["properties"]) == {
        "regenerate",
        "continue",
        "keep",
        "discard",
        "check_status",
    }
    check = next(item for key, item in paths.items() if key.lstrip("/") == f"{base}check_status")
    assert check["post"]["operationId"] == "checkStatusRun"
    assert set(components["RecoveryResult"]["properties"]) == {"action", "runId", "outcome", "newRunId"}
