"""A database router that puts helix's models and the user model on different databases is a check error.

Seen on a live host site: a router sending helix's models to a database of their own made
every send answer a "retryable" ``503`` forever (a session's ``owner`` foreign key points at
a user table on another database), and ``check`` said nothing. ``helix_django.E008`` names
it; E006's hint no longer suggests such a router. A database error no retry can fix (an
integrity or data error: a foreign-key violation, a value too long) is not ``retryable``;
a lock or a lost connection (an operational error) still is.
"""

from __future__ import annotations

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import DatabaseError, OperationalError, connection, transaction
from django.test import override_settings

from helix_django.checks import _check_database
from helix_django.errors import as_helix_error
from helix_django.models import ChatSession
from helix_django.runtime.entries import typed_errors

HERE = __name__


class UsersElsewhereRouter:
    """The host's users (auth, sessions) on a database of their own; everything else on ``default``."""

    def db_for_write(self, model, **hints):
        return "users" if model._meta.app_label in ("auth", "accounts", "sessions") else None

    db_for_read = db_for_write


class HelixElsewhereRouter:
    """helix_django's models on a database of their own (``default`` is not touched by the check)."""

    def db_for_write(self, model, **hints):
        return "helix" if model._meta.app_label == "helix_django" else None

    db_for_read = db_for_write


class EverythingTogetherRouter:
    """Every model on ``default``: helix's and the user model together."""

    def db_for_write(self, model, **hints):
        return "default"

    db_for_read = db_for_write


def helix_errors() -> list:
    return [message for message in run_checks() if message.id == "helix_django.E008"]


@pytest.mark.parametrize("router", ["UsersElsewhereRouter", "HelixElsewhereRouter"])
def test_a_router_that_separates_helix_from_the_user_model_is_an_error(router):
    with override_settings(DATABASE_ROUTERS=[f"{HERE}.{router}"]):
        [error] = helix_errors()
        assert error.is_serious()
        assert "AUTH_USER_MODEL" in error.hint or "user model" in error.hint
        with pytest.raises(SystemCheckError, match="helix_django.E008"):
            call_command("check")


@pytest.mark.parametrize("routers", [[], [f"{HERE}.EverythingTogetherRouter"]], ids=["no-router", "same-database"])
def test_helix_and_the_user_model_on_one_database_is_fine(routers):
    with override_settings(DATABASE_ROUTERS=routers):
        assert helix_errors() == []


def test_e006s_hint_does_not_suggest_a_router_of_helix_alone(monkeypatch):
    monkeypatch.setattr(connection, "vendor", "mysql")
    [error] = _check_database()
    assert error.id == "helix_django.E006"
    assert "user model" in error.hint


def database_error(write) -> DatabaseError:
    """The real error the database raises for ``write`` (committed in a transaction of its own)."""
    with pytest.raises(DatabaseError) as raised, transaction.atomic():
        write()
    return raised.value


def a_foreign_key_violation() -> None:
    ChatSession.objects.create(id="s_owner_on_another_database", owner_id=987654321)


def a_value_too_long() -> None:
    if connection.vendor == "sqlite":
        pytest.skip("SQLite does not enforce a CharField's max_length")
    ChatSession.objects.create(id="s_value_too_long", anonymous_key="k" * 100)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("write", [a_foreign_key_violation, a_value_too_long], ids=["foreign-key", "too-long"])
def test_a_database_error_no_retry_fixes_is_not_retryable(write):
    error = database_error(write)
    for typed in (as_helix_error(error), _typed_by_the_executor(error)):
        assert typed.code == "state_history_incomplete"
        assert typed.to_body()["retryable"] is False and typed.status != 503


def test_a_lock_or_a_lost_connection_stays_retryable():
    for error in (OperationalError("database is locked"), OperationalError("server closed the connection")):
        for typed in (as_helix_error(error), _typed_by_the_executor(error)):
            assert (typed.status, typed.to_body()["retryable"]) == (503, True)


def _typed_by_the_executor(error: DatabaseError):
    with pytest.raises(Exception) as raised, typed_errors("test"):
        raise error
    return raised.value
