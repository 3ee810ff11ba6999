"""Helix's routes work under a host permission class that reads the view's queryset.

With ``DEFAULT_PERMISSION_CLASSES = ["rest_framework.permissions.DjangoModelPermissions"]``
and a user holding every helix permission, every helix route answered 500
``framework_internal_error`` (the class asserts the view has a ``queryset``). Helix's views
(and the chat route's permission view) name ``ChatSession``'s queryset: the user's
permissions decide, a user without them is a typed 403.
"""

from __future__ import annotations

import pytest

from tests.host.sites import PREFIX, new_session_id

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def grant_every_helix_permission(user) -> None:
    from django.contrib.auth.models import Permission

    user.user_permissions.set(Permission.objects.filter(content_type__app_label="helix_django"))


def test_every_helix_route_answers_a_user_with_helixs_model_permissions(host_site):
    site = host_site("model_permissions")
    grant_every_helix_permission(site.users["alice"].user)
    sid = new_session_id()

    sent = site.send(sid, "alice")
    assert sent.status_code == 200, sent.text
    assert sent.text.rstrip().endswith("data: [DONE]")
    run_id = site.request("GET", f"{PREFIX}/sessions/{sid}/runs/", "alice").json()["results"][0]["id"]
    base = f"{PREFIX}/sessions/{sid}"
    reads = [f"{PREFIX}/sessions/", f"{base}/", f"{base}/snapshot", f"{base}/runs/", f"{base}/runs/{run_id}/recovery"]
    for path in reads:
        answer = site.request("GET", path, "alice")
        assert answer.status_code == 200, (path, answer.text)
    created = site.request("POST", f"{PREFIX}/sessions/", "alice", json={"id": new_session_id()})
    assert created.status_code == 201, created.text
    cancelled = site.request("POST", f"{base}/runs/{run_id}/cancel", "alice")
    assert cancelled.status_code in (200, 409), cancelled.text
    body = {"results": [{"toolCallId": "call_unknown", "output": {"ok": True}}]}
    late = site.request("POST", f"{base}/runs/{run_id}/tool-results", "alice", json=body)
    assert late.status_code in (200, 400, 409), late.text
    assert site.request("DELETE", f"{base}/", "alice").status_code == 204


def test_a_user_without_helixs_model_permissions_is_a_typed_403(host_site):
    site = host_site("model_permissions")
    sid = new_session_id()
    refused = site.request("POST", f"{PREFIX}/sessions/", "bob", json={"id": sid})
    assert refused.status_code == 403, refused.text
    assert refused.json()["code"] == "auth_permission_denied"
    chat = site.send(sid, "bob")
    assert chat.status_code == 403, chat.text
    assert chat.json()["code"] == "auth_permission_denied"
