"""The kit's parts without a server: importing it needs no pytest, typed errors, the wrapper app's database rule."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
from django.test import override_settings

from helix_django.testing import Event, LiveServerError, Reply, SSEResult, scripted_agent
from helix_django.testing.asgi import point_at_test_databases
from helix_django.testing.live import default_asgi_app


def test_importing_the_kit_does_not_import_pytest():
    code = "import sys, helix_django.testing, helix_django.testing.asgi; print('pytest' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_refusal_body_is_a_typed_error():
    body = {"error": "A run is already live.", "code": "state_already_running", "retryable": True}
    result = SSEResult(409, httpx.Headers(), [], body)
    assert result.error is not None
    assert (result.error.status, result.error.code, result.error.retryable) == (409, "state_already_running", True)


def test_an_error_frame_in_a_stream_is_a_typed_error_and_ids_are_the_cursor():
    failure = {"error": "The model failed.", "code": "provider_error", "retryable": False}
    events = [
        Event("3", "message", json.dumps({"type": "text-delta", "id": "t", "delta": "Hi"})),
        Event("4", "error", json.dumps({"type": "error", "errorText": json.dumps(failure)})),
        Event(None, "message", "[DONE]"),
    ]
    result = SSEResult(200, httpx.Headers(), events)
    assert result.error is not None and result.error.code == "provider_error" and not result.error.retryable
    assert (result.sequences, result.last_id, result.text, result.done) == ([3, 4], 4, "Hi", True)


def test_the_wrapper_points_only_aliases_on_the_same_database_server_at_the_test_database():
    databases = {
        "default": {"ENGINE": "django.db.backends.postgresql", "HOST": "db", "PORT": 5432, "NAME": "site"},
        "other": {"ENGINE": "django.db.backends.postgresql", "HOST": "db", "PORT": 5433, "NAME": "private"},
    }
    names = {
        alias: {"ENGINE": "django.db.backends.postgresql", "HOST": "db", "PORT": "5432", "NAME": f"test_{alias}"}
        for alias in ("default", "other", "absent")
    }
    point_at_test_databases(databases, names)
    assert databases["default"]["NAME"] == "test_default"
    assert databases["other"]["NAME"] == "private"


def test_the_default_app_is_asgi_application_as_module_and_attribute():
    with override_settings(ASGI_APPLICATION="mysite.asgi.application"):
        assert default_asgi_app() == "mysite.asgi:application"
    with override_settings(ASGI_APPLICATION=None), pytest.raises(LiveServerError):
        default_asgi_app()


def test_scripted_agent_names_the_host_tools():
    agent = scripted_agent(tools=["weather.tools.forecast"], TEXT="Sunny.")["AGENTS"]["default"]
    assert agent["TOOLS"] == ["weather.tools.forecast"]
    assert agent["PROVIDER"]["OPTIONS"] == {"TEXT": "Sunny."}


def test_the_fake_openai_fixture_serves_scripted_replies(fake_openai):
    fake_openai.replies.append(Reply(text="Hello there"))
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    answer = httpx.post(fake_openai.base_url + "/chat/completions", json=body).json()
    assert answer["choices"][0]["message"]["content"] == "Hello there"
    assert fake_openai.requests == [{"path": "/v1/chat/completions", "body": body}]
