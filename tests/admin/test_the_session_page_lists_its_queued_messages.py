"""The session's admin page lists the messages queued behind its answer, with their status."""

from __future__ import annotations

import pytest
from django.urls import reverse

from helix_django.store import queued
from tests.recovery.factories import InFlight

pytestmark = pytest.mark.django_db(transaction=True)


def message(text: str) -> dict:
    return {"id": "u_q", "role": "user", "parts": [{"type": "text", "text": text}], "metadata": {}}


def test_the_session_admin_page_lists_its_queued_messages(staff_client):
    live = InFlight("s-queue-admin")
    row, _ = queued.enqueue_message(
        live.session_id, message("please also check Bergen"), request_key=None, input_hash="a"
    )
    page = staff_client.get(reverse("admin:helix_django_chatsession_change", args=[live.session_id]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "please also check Bergen" in html and row.pk in html
