"""System checks report misconfiguration with ids and hints (docs/checks.md)."""

from __future__ import annotations

import pytest
from django.test import override_settings

from helix_django.checks import check_settings


def ids(messages):
    return sorted(m.id for m in messages)


def test_default_test_settings_are_clean():
    assert ids(check_settings()) == []


def test_unknown_key_and_bad_backend_paths():
    helix = {
        "STREAM_MANAGER": {},
        "STREAM_MANAGERS": {"default": {"BACKEND": "nope.Missing"}},
        "AGENTS": {"a": {"PROVIDER": {"BACKEND": "nope.Provider"}}},
        "DEFAULT_AGENT": "a",
        "EXECUTOR": "nope.Executor",
    }
    with override_settings(HELIX=helix):
        messages = check_settings()
    assert ids(messages) == ["helix_django.E002", "helix_django.E003", "helix_django.E004", "helix_django.W001"]
    assert all(m.hint for m in messages)


SCRIPTED = {"BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider"}


@pytest.mark.parametrize(
    "entry", ["myapp.tools.missing", "helix_django.runtime.tools.load_tools"], ids=["unimportable", "not-a-tool"]
)
def test_an_agents_tool_that_cannot_be_loaded_is_an_error(entry):
    """Found by a new user (seventeenth session): every send was a 500 logged as a bare ImportError."""
    with override_settings(HELIX={"AGENTS": {"default": {"PROVIDER": SCRIPTED, "TOOLS": [entry]}}}):
        messages = check_settings()
    assert ids(messages) == ["helix_django.E007"]
    assert entry in messages[0].msg and messages[0].hint


@pytest.mark.parametrize("value", ["queue", "", None, 1])
def test_an_agents_unknown_multitask_strategy_is_an_error(value):
    """Every send meeting a live answer would fail with ImproperlyConfigured; check names the agent."""
    with override_settings(HELIX={"AGENTS": {"default": {"PROVIDER": SCRIPTED, "MULTITASK": value}}}):
        messages = check_settings()
    assert ids(messages) == ["helix_django.E009"]
    assert "'default'" in messages[0].msg and "interrupt" in messages[0].hint
    for strategy in ("reject", "interrupt"):
        with override_settings(HELIX={"AGENTS": {"default": {"PROVIDER": SCRIPTED, "MULTITASK": strategy}}}):
            assert ids(check_settings()) == []


def test_a_default_agent_missing_from_the_agents_is_an_error():
    """Found by a new user (seventeenth session): every send was refused agent_unknown and check said nothing."""
    with override_settings(HELIX={"AGENTS": {"support": {"PROVIDER": SCRIPTED}}}):
        assert ids(check_settings()) == ["helix_django.W006"]
    with override_settings(HELIX={"AGENTS": {"support": {"PROVIDER": SCRIPTED}}, "DEFAULT_AGENT": "support"}):
        assert ids(check_settings()) == []


REDIS_LAYER = "channels_redis.core.RedisChannelLayer"


@pytest.mark.parametrize(
    "hosts",
    [["redis://127.0.0.1:6379/1"], [{"address": "redis://127.0.0.1:6379/1"}], [{"address": "x", "socket_timeout": 5}]],
    ids=["url", "no-timeout", "timeout-5"],
)
def test_a_channels_redis_layer_timing_out_before_its_blocking_receive_is_warned(hosts):
    """Found on the scale-out set-up (seventeenth session): WebSockets closed 1011 every 5 s of quiet."""
    with override_settings(CHANNEL_LAYERS={"default": {"BACKEND": REDIS_LAYER, "CONFIG": {"hosts": hosts}}}):
        messages = check_settings()
    assert ids(messages) == ["helix_django.W005"]
    assert "socket_timeout" in messages[0].hint


@pytest.mark.parametrize("timeout", [10, None])
def test_a_channels_redis_layer_with_a_longer_socket_timeout_passes(timeout):
    hosts = [{"address": "redis://127.0.0.1:6379/1", "socket_timeout": timeout}]
    with override_settings(CHANNEL_LAYERS={"default": {"BACKEND": REDIS_LAYER, "CONFIG": {"hosts": hosts}}}):
        assert ids(check_settings()) == []


def test_a_database_other_than_sqlite_or_postgresql_is_an_error(monkeypatch):
    from django.db import connection

    monkeypatch.setattr(connection, "vendor", "mysql")
    messages = check_settings()
    assert ids(messages) == ["helix_django.E006"]
    assert "mysql" in messages[0].msg and messages[0].hint


def test_not_a_dict():
    with override_settings(HELIX=["x"]):
        assert ids(check_settings()) == ["helix_django.E001"]


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_missing_channel_layer_and_sqlite_without_wal(settings):
    settings.CHANNEL_LAYERS = {}
    db = dict(settings.DATABASES["default"])
    if db["ENGINE"].endswith("sqlite3"):
        db["OPTIONS"] = {}
        settings.DATABASES = {**settings.DATABASES, "default": db}
        assert ids(check_settings()) == ["helix_django.W002", "helix_django.W003"]
    else:
        assert ids(check_settings()) == ["helix_django.W002"]


def test_numeric_settings_must_be_positive_and_the_lease_renewed_in_time():
    with override_settings(HELIX={"LEASE_SECONDS": "abc", "HEARTBEAT_SECONDS": 0, "MAX_REQUEST_BYTES": True}):
        assert ids(check_settings()) == ["helix_django.E005", "helix_django.E005", "helix_django.E005"]
    with override_settings(HELIX={"LEASE_SECONDS": 10, "LEASE_RENEW_SECONDS": 10}):
        assert ids(check_settings()) == ["helix_django.W004"]
    with override_settings(HELIX={"LEASE_SECONDS": 30, "LEASE_RENEW_SECONDS": 5, "FLUSH_INTERVAL_MS": 2.5}):
        assert ids(check_settings()) == []
