"""An anonymous visitor's owner token lives inside the Django session, on every engine Django ships.

The token is created on the visitor's first send (``create_anonymous``) and read back from
the session: the same owner after the session is loaded again from its cookie, after the
host writes to it (a signed-cookie session is signed again) and after ``cycle_key()`` (as
``login()`` calls it). Before, the session key owned, and it changes in the last two cases.
"""

from __future__ import annotations

from importlib import import_module

import pytest
from django.contrib.auth.models import AnonymousUser

from helix_django.access.ownership import OWNER_TOKEN_KEY, owner_for

pytestmark = pytest.mark.django_db

ENGINES = ["db", "cache", "cached_db", "file", "signed_cookies"]


@pytest.fixture(autouse=True)
def anonymous_chat(settings, tmp_path):
    settings.HELIX = {**settings.HELIX, "ALLOW_ANONYMOUS": True}
    settings.SESSION_FILE_PATH = str(tmp_path)


def reloaded(engine: str, session):
    """The session as the visitor's next request loads it from the cookie the last response set."""
    session.save()
    return import_module(f"django.contrib.sessions.backends.{engine}").SessionStore(session.session_key)


@pytest.mark.parametrize("engine", ENGINES)
def test_the_owner_token_survives_a_reload_a_host_write_and_a_new_key(engine):
    session = import_module(f"django.contrib.sessions.backends.{engine}").SessionStore()
    first = owner_for(AnonymousUser(), session, create_anonymous=True)
    assert first.anonymous_key == session[OWNER_TOKEN_KEY] and 0 < len(first.anonymous_key) <= 64

    session = reloaded(engine, session)
    assert owner_for(AnonymousUser(), session).anonymous_key == first.anonymous_key

    session["host_data"] = "written by a host page"
    session = reloaded(engine, session)
    assert owner_for(AnonymousUser(), session, create_anonymous=True).anonymous_key == first.anonymous_key

    session.cycle_key()
    session = reloaded(engine, session)
    assert owner_for(AnonymousUser(), session).anonymous_key == first.anonymous_key


@pytest.mark.parametrize("engine", ENGINES)
def test_two_new_visitors_never_share_an_owner(engine):
    store = import_module(f"django.contrib.sessions.backends.{engine}").SessionStore
    owners = {owner_for(AnonymousUser(), store(), create_anonymous=True).anonymous_key for _ in range(2)}
    assert len(owners) == 2
