"""schemathesis over the whole served OpenAPI schema, authenticated, against a real daphne server (issue 20).

Every operation the schema lists (``GET <prefix>schema/``) is called with schemathesis'
default number of generated examples (hypothesis' 100), as a signed-in user with a
session of its own (so path parameters hit real rows as well as unknown ids). For every
response: no 5xx, an error body is typed JSON (``error``, ``code``, ``retryable``), and a
refused request (4xx) wrote nothing. Runs in one pass of CI only (marker ``fuzz``).
"""

from __future__ import annotations

import json

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from helix_django.models import ChatSession, Message, Run, ToolExecution
from tests.transport.conftest import PREFIX, chat_url, new_session_id, read_sse, send_body, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.fuzz]

#: Requests, 5xx, untyped error bodies and refused requests that wrote, over the module (printed at the end).
FIGURES = {"operations": 0, "requests": 0, "5xx": 0, "untyped": 0, "refused_with_writes": 0}
#: Requests by operation label (``POST /helix/api/sessions/{session_id}/chat``), printed with the figures.
BY_OPERATION: dict[str, int] = {}


@pytest.fixture(scope="module", autouse=True)
def _print_figures():
    yield
    print(f"\nschemathesis over the served schema: {FIGURES}")
    for label, count in sorted(BY_OPERATION.items()):
        print(f"  {count:4d}  {label}")


def writes():
    return tuple(model.objects.count() for model in (ChatSession, Run, Message, ToolExecution))


@pytest.fixture
def owner(shared_server, users):
    """User a's headers, with one session and one completed run of its own."""
    headers = users["a"][1]
    sid = new_session_id()
    with httpx.Client(headers=headers, timeout=20) as client:
        assert read_sse(client, "POST", chat_url(shared_server, sid), json=send_body(sid, [user_message("hi")])).done
    return headers


def test_every_operation_answers_typed_and_refusals_write_nothing(shared_server, owner):
    # The schema as the live server serves it; schemathesis' pytest loader (from_fixture) fails on pytest 9,
    # so each operation runs through its hypothesis strategy here, with the default number of examples.
    served = schemathesis.openapi.from_url(shared_server.url(f"{PREFIX}/schema/"))
    operations = [result.ok() for result in served.get_all_operations()]
    assert len(operations) >= 6, [op.label for op in operations]
    labels = {op.label for op in operations}
    # The chat and stream routes are in the served schema, so they are fuzzed too (issue 20).
    assert {f"POST {PREFIX}/sessions/{{session_id}}/chat", f"GET {PREFIX}/sessions/{{session_id}}/stream"} <= labels, (
        labels
    )

    def check(case):
        before = writes()
        response = case.call(base_url=shared_server.base_url, headers=owner, timeout=20)
        FIGURES["requests"] += 1
        BY_OPERATION[case.operation.label] = BY_OPERATION.get(case.operation.label, 0) + 1
        status = response.status_code
        FIGURES["5xx"] += status >= 500
        assert status < 500, (case.method, case.formatted_path, status, response.content[:200])
        if status >= 400:
            try:
                body = json.loads(response.content)
            except ValueError:
                body = None
            typed = isinstance(body, dict) and {"error", "code", "retryable"} <= body.keys()
            FIGURES["untyped"] += not typed
            assert typed, (case.method, case.formatted_path, status, response.content[:200])
            wrote = writes() != before
            FIGURES["refused_with_writes"] += wrote
            assert not wrote, (case.method, case.formatted_path, status)

    for operation in operations:
        FIGURES["operations"] += 1
        fuzz = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))
        fuzz(given(operation.as_strategy())(lambda case: check(case)))()
    assert FIGURES["requests"] >= 100 * len(operations) * 0.5  # hypothesis stops early only on small input spaces
