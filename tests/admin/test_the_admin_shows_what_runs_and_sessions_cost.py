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
