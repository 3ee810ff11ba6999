"""The tool-resolution page of the support console is closed to staff who may not view runs.

Seen: a staff user with no permission on generations (``is_staff`` only) got the
"Resolve tool execution" page of any run with 200: the tool's name, effect class and
idempotency key (``charge:<order>``), which the run's own change page and every other
recovery page refuse with 403. Expected: 403, as ``confirm_action`` does.
"""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from tests.recovery.factories import InFlight

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_resolve_tool_page_needs_the_view_permission_on_runs(staff_client):
    flight = InFlight("s-resolve-perm")
    execution = flight.tool("call_1", "charge_card", effect="side_effect", status="unknown", key="charge:order-991")
    bare = User.objects.create_user("bare-staff", password="pw", is_staff=True)
    client = Client()
    client.force_login(bare)
    resolve = reverse("admin:helix_django_run_resolve_tool", args=[quote(flight.run_id), execution.pk])
    change = reverse("admin:helix_django_run_change", args=[quote(flight.run_id)])
    assert client.get(change).status_code == 403
    page = client.get(resolve)
    assert page.status_code == 403
    assert b"charge:order-991" not in page.content
    assert staff_client.get(resolve).status_code == 200  # a reconciler still opens it
