"""The run page and the session page show tokens, estimated ones named (Run.usage, helix_django/usage.py)."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from helix_django.models import Run
from tests.recovery.factories import InFlight

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_run_page_and_the_session_page_show_tokens(staff_client):
    first = InFlight("s-cost")
    Run.objects.filter(pk=first.run_id).update(
        status="completed",
        usage={"inputTokens": 10, "outputTokens": 240, "source": "reported", "estimatedTokens": 0},
    )
    second = InFlight("s-cost")
    Run.objects.filter(pk=second.run_id).update(
        usage={"inputTokens": 12, "outputTokens": 40, "source": "partly_estimated", "estimatedTokens": 15}
    )
    run_page = staff_client.get(reverse("admin:helix_django_run_change", args=[quote(second.run_id)]))
    assert "12 in · 40 out (15 estimated)" in run_page.content.decode()
    session_page = staff_client.get(reverse("admin:helix_django_chatsession_change", args=["s-cost"]))
    assert "22 in · 280 out (15 estimated)" in session_page.content.decode()


def test_the_dashboard_shows_tokens_by_model_ending_and_user(staff_client, django_user_model):
    ada = django_user_model.objects.create_user("ada-spender", password="pw")
    flights = [InFlight("s-spend-1", owner=ada), InFlight("s-spend-2", owner=ada)]
    Run.objects.filter(pk=flights[0].run_id).update(
        status="completed", model="model-a", usage={"inputTokens": 100, "outputTokens": 900, "estimatedTokens": 0}
    )
    Run.objects.filter(pk=flights[1].run_id).update(
        status="interrupted", model="model-b", usage={"inputTokens": 7, "outputTokens": 50, "estimatedTokens": 50}
    )
    page = staff_client.get(reverse("admin:helix_django_run_dashboard"))
    spend = page.context["spend_tables"]
    by_model = {row.label: (row.input_tokens, row.output_tokens, row.estimated_tokens) for row in spend[0][1]}
    assert by_model == {"model-a": (100, 900, 0), "model-b": (7, 50, 50)}
    by_status = {row.label: row.output_tokens for row in spend[1][1]}
    assert by_status == {"completed": 900, "interrupted": 50}
    assert [(row.label, row.total) for row in spend[2][1]] == [("ada-spender", 1057)]
    assert "Tokens by ending (24 h)" in page.content.decode()
