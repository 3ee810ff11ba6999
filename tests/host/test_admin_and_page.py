"""The admin and the chat page inside the "real host": an email user model, ManifestStaticFilesStorage."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urljoin

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from helix_django import store
from helix_django.models import ChatSession, Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client():
    user = get_user_model().objects.create_superuser(email="support@host.example", password="pw-1")
    client = Client(HTTP_HOST="api.example")
    client.force_login(user)
    return client, user


def test_admin_search_and_bulk_actions_with_an_email_user_model(staff_client):
    client, user = staff_client
    session = ChatSession.objects.create(id="s_admin_search", owner=user)
    run = store.start_run(
        store.RunStartRequest(
            session_id=session.pk,
            input_messages=[{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
        )
    ).run
    sessions = client.get("/admin/helix_django/chatsession/", {"q": "support@host"})
    assert sessions.status_code == 200 and session.pk.encode() in sessions.content
    runs = client.get("/admin/helix_django/run/", {"q": "support@host"})
    assert runs.status_code == 200 and run.pk.encode() in runs.content
    confirm = client.post("/admin/helix_django/run/", {"action": "recovery_cancel", "_selected_action": [run.pk]})
    assert confirm.status_code == 200 and run.pk.encode() in confirm.content
    assert Run.objects.get(pk=run.pk).status == run.status  # a confirmation page first, nothing changed yet


def _import_map(html: str) -> dict[str, str]:
    match = re.search(r'<script type="importmap">(.*?)</script>', html, re.S)
    assert match, "the chat page has no import map"
    return json.loads(match.group(1))["imports"]


def test_the_chat_page_loads_every_client_module_by_its_hashed_name(staff_client):
    client, _user = staff_client
    page = client.get("/chat/s_page/")
    assert page.status_code == 200
    imports = _import_map(page.content.decode())
    root = Path(settings.STATIC_ROOT)
    hashed_names = {}
    for plain, stored in imports.items():
        name = plain.removeprefix(settings.STATIC_URL)
        assert stored != plain and (root / stored.removeprefix(settings.STATIC_URL)).is_file()
        hashed_names[name] = stored
    assert set(hashed_names) >= {"helix_django/client.js", "helix_django/sse.js", "helix_django/chat-ui.js"}
    # Every relative import of every hashed module resolves (through the map) to a hashed file.
    for stored in hashed_names.values():
        source = (root / stored.removeprefix(settings.STATIC_URL)).read_text()
        for target in re.findall(r'from\s+"(\./[^"]+)"', source):
            resolved = urljoin(stored, target)
            assert resolved in imports or resolved in imports.values(), (stored, target)
    entry = re.search(r'import \{ mountChat \} from "([^"]+)"', page.content.decode()).group(1)
    assert entry == hashed_names["helix_django/chat-ui.js"]
