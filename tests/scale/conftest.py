"""Scale-out fixtures: the live daphne factory, a user with a token, the shared-process configuration."""

from __future__ import annotations

import os
import uuid

import pytest

from tests.conftest import redis_url

# These start a PostgreSQL of their own, so they prove the same on either pass of the suite
# (SQLite, then PostgreSQL): CI runs them once, in the PostgreSQL pass.
if not os.environ.get("HELIX_TEST_DATABASE_URL"):
    collect_ignore = [
        "test_connection_pool.py",
        "test_database_connection_faults.py",
        "test_database_outage_during_a_run.py",
        "test_multiprocess_faults.py",  # on PostgreSQL + Redis, as a scaled-out site runs
        "test_a_rolling_restart_hands_a_durable_answer_to_the_other_process.py",  # likewise
    ]


@pytest.fixture
def user_headers(transactional_db):
    """Auth headers of a fresh user: ``Authorization`` (DRF token) and ``Cookie`` (a logged-in Django session).

    HTTP routes take the token; the WebSocket route authenticates by the session cookie.
    """
    from django.contrib.auth import get_user_model
    from django.test import Client
    from rest_framework.authtoken.models import Token

    user = get_user_model().objects.create_user(username=f"scale-{uuid.uuid4().hex[:8]}", password="pw-not-secret")
    browser = Client()
    browser.force_login(user)
    return {
        "Authorization": f"Token {Token.objects.create(user=user).key}",
        "Cookie": f"sessionid={browser.cookies['sessionid'].value}",
    }


@pytest.fixture
def scale_env():
    """Env of every process of one scale-out test: its own layer prefix and Redis stream key prefix."""
    tag = uuid.uuid4().hex
    return {
        "HELIX_TEST_REDIS_URL": redis_url(),
        "HELIX_TEST_LAYER_PREFIX": f"helix-test-{tag}",
        "HELIX_TEST_STREAM_PREFIX": f"helix-test:{tag}",
    }
