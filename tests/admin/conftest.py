"""Admin fixtures: staff users with and without the ``reconcile_run`` permission."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client


def _staff(username: str, *, reconcile: bool) -> User:
    user = User.objects.create_user(username, password="pw", is_staff=True)
    codenames = ["view_run", "view_chatsession", "view_message", "view_checkpoint", "view_toolexecution"]
    codenames.append("view_queuedmessage")
    if reconcile:
        codenames.append("reconcile_run")
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="helix_django", codename__in=codenames))
    return User.objects.get(pk=user.pk)


@pytest.fixture
def reconciler(db):
    return _staff("reconciler", reconcile=True)


@pytest.fixture
def viewer(db):
    return _staff("viewer", reconcile=False)


@pytest.fixture
def staff_client(reconciler):
    client = Client()
    client.force_login(reconciler)
    return client


@pytest.fixture
def viewer_client(viewer):
    client = Client()
    client.force_login(viewer)
    return client
