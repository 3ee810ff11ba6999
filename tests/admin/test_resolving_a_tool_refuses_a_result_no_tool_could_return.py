"""Staff's "mark executed" of an unknown tool takes a result under the same rules as any tool result.

Seen: the result field of the resolution page went through a bare ``json.loads``. A
result nested 100 000 deep raised RecursionError (a 500 page, on every database); a
result holding ``"\\u0000"`` was a 500 DataError on PostgreSQL (``jsonb`` refuses NUL);
a 1 MiB result was stored although ``MAX_TOOL_RESULT_BYTES`` (512 KiB) bounds every
tool result (a Continue would then send it to the model and the client as one chunk).
Expected: the page again (400) saying why, the execution still ``unknown``.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from helix_django.models import ToolExecution
from tests.recovery.factories import InFlight

pytestmark = pytest.mark.django_db(transaction=True)


def _unknown(session_id: str):
    flight = InFlight(session_id)
    execution = flight.tool("call_1", "create_issue", effect="side_effect", status="unknown", key="issue:7")
    url = reverse("admin:helix_django_run_resolve_tool", args=[quote(flight.run_id), execution.pk])
    return execution, url


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ("[" * 100_000 + "]" * 100_000, "valid JSON"),
        (json.dumps({"note": "a\u0000b"}), "NUL"),
        (json.dumps({"blob": "x" * (1024 * 1024)}), "larger than the limit"),
    ],
    ids=["deep", "nul", "too_large"],
)
def test_a_result_that_cannot_be_a_tool_result_is_refused_on_the_page(staff_client, settings, result, expected):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4 * 1024 * 1024
    execution, url = _unknown("s-resolve-bad")
    page = staff_client.post(url, {"outcome": "executed", "result": result})
    assert page.status_code == 400
    assert expected in page.content.decode()
    assert ToolExecution.objects.get(pk=execution.pk).status == "unknown"


def test_a_result_within_the_limit_is_still_recorded(staff_client):
    execution, url = _unknown("s-resolve-ok")
    page = staff_client.post(url, {"outcome": "executed", "result": json.dumps({"blob": "x" * 1000})})
    assert page.status_code == 302
    assert ToolExecution.objects.get(pk=execution.pk).status == "succeeded"
