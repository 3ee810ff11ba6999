"""The run's admin page tells which tool executions their tool's ``reconcile`` settled, and how."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from helix_django.models import ToolExecution
from tests.recovery.factories import InFlight

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_tool_list_names_each_reconcile_answer(staff_client):
    flight = InFlight("s-reconciled")
    for call, status, code in (("c1", "succeeded", "reconciled"), ("c2", "failed", "reconciled_not_executed")):
        ToolExecution.objects.create(
            run_id=flight.run_id, tool_call_id=call, name="charge", effect="side_effect", status=status, error_code=code
        )
    page = staff_client.get(reverse("admin:helix_django_run_change", args=[quote(flight.run_id)]))
    html = page.content.decode()
    assert "the tool's reconcile found it executed" in html
    assert "the tool's reconcile found it not executed" in html
