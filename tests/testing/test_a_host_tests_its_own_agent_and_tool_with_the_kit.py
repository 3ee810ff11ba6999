"""A fresh host project tests its own agent and tool against helix's wire with helix_django.testing.

``django-admin startproject`` builds the host under ``tmp_path``; it installs helix_django,
adds an app with a tool of its own and an agent on the scripted provider that calls it,
enables the kit's pytest plugin, and writes one test that uses the ``helix_server`` fixture
(the host's ASGI app under daphne on the host's test database) and :class:`ChatClient`:
a send dropped after a few frames, then a resume from the cursor it held. That pytest
session runs in a subprocess; this test asserts it passed, and the host test asserts what
it saw: the tool's output and the text streamed, sequence ids strictly increasing, and the
resume yielding the rest exactly once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import helix_django

pytestmark = [pytest.mark.servers]

PACKAGE_ROOT = Path(helix_django.__file__).resolve().parent.parent

SETTINGS = """

INSTALLED_APPS += ["rest_framework", "rest_framework.authtoken", "channels", "helix_django", "weather"]
ASGI_APPLICATION = "hostsite.asgi.application"
CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
# The live server is another process: the test database must be a file, not memory.
DATABASES["default"]["TEST"] = {"NAME": BASE_DIR / "test_db.sqlite3"}
DATABASES["default"]["OPTIONS"] = {"init_command": "PRAGMA journal_mode=WAL;", "transaction_mode": "IMMEDIATE", "timeout": 20}
REST_FRAMEWORK = {"DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"]}
ANSWER = "It is sunny in Oslo today, with a light breeze from the fjord and clear skies until the evening."
HELIX = {
    "AGENTS": {
        "default": {
            "PROVIDER": {
                "BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider",
                "OPTIONS": {
                    "PACE_TPS": 60,
                    "STEPS": [
                        {"TEXT": "Let me check. ", "TOOL_CALLS": [{"name": "forecast", "arguments": {"city": "Oslo"}}]},
                        {"TEXT": ANSWER},
                    ],
                },
            },
            "MODEL": "scripted-1",
            "SYSTEM_PROMPT": "You are the weather desk.",
            "TOOLS": ["weather.tools.forecast"],
        }
    },
    "DRAIN_SECONDS": 1,
}
"""

ASGI = """
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostsite.settings")
django_app = get_asgi_application()

from helix_django.transport.routing import get_asgi_application as helix_app  # noqa: E402

application = helix_app(django_app, prefix="helix/api/")
"""

TOOLS = '''
from helix_django.runtime.tools import tool


@tool(effect="read_only")
def forecast(city: str) -> dict:
    """The host's own tool: the forecast of a city."""
    return {"city": city, "forecast": f"sunny in {city}"}
'''

HOST_TEST = """
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token

from helix_django.testing import ChatClient, new_session_id


@pytest.mark.django_db(transaction=True)
def test_the_weather_desk_answers_with_its_tool(helix_server):
    token = Token.objects.create(user=User.objects.create_user("ada", password="pw-not-secret"))
    with ChatClient(helix_server.base_url, headers={"Authorization": f"Token {token.key}"}) as chat:
        sid = new_session_id()
        first = chat.send(sid, "What is the weather in Oslo?", stop_after=12)
        assert first.status == 200 and not first.done and first.error is None
        rest = chat.resume(sid, from_sequence=first.last_id)
        assert rest.status == 200 and rest.done and rest.error is None

        sequences = first.sequences + rest.sequences
        assert sequences == sorted(set(sequences)), sequences
        assert rest.sequences[0] > first.last_id
        chunks = first.chunks + rest.chunks
        outputs = [c["output"] for c in chunks if c["type"] == "tool-output-available"]
        assert outputs == [{"city": "Oslo", "forecast": "sunny in Oslo"}]
        assert first.text + rest.text == "Let me check. " + settings.ANSWER

        again = chat.resume(sid, from_sequence=first.last_id)
        assert again.sequences == rest.sequences and again.text == rest.text
        snapshot = chat.snapshot(sid)
        assert snapshot["status"] == "ended" and snapshot["streamSequence"] == rest.last_id
"""


def build_host(root: Path) -> None:
    """Build the host project in ``root`` (startproject, an app with a tool, the kit's plugin, one test)."""
    django_admin = str(Path(sys.executable).with_name("django-admin"))
    subprocess.run([django_admin, "startproject", "hostsite", str(root)], check=True)
    settings = root / "hostsite" / "settings.py"
    settings.write_text(settings.read_text() + SETTINGS)
    urls = root / "hostsite" / "urls.py"
    urls.write_text(
        urls.read_text().replace("from django.urls import path", "from django.urls import include, path")
        + '\nurlpatterns += [path("helix/api/", include("helix_django.urls"))]\n'
    )
    (root / "hostsite" / "asgi.py").write_text(ASGI)
    (root / "weather").mkdir()
    (root / "weather" / "__init__.py").write_text("")
    (root / "weather" / "tools.py").write_text(TOOLS)
    (root / "conftest.py").write_text('pytest_plugins = ["helix_django.testing.pytest_plugin"]\n')
    (root / "pytest.ini").write_text(
        "[pytest]\nDJANGO_SETTINGS_MODULE = hostsite.settings\npythonpath = .\nasyncio_default_fixture_loop_scope = function\n"
    )
    (root / "test_weather.py").write_text(textwrap.dedent(HOST_TEST))


def host_env() -> dict[str, str]:
    """This process's environment without the suite's own settings; helix_django from this checkout."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DJANGO_", "HELIX_TEST"))}
    env.pop("HELIX_SQLITE_PATH", None)
    env["PYTHONPATH"] = str(PACKAGE_ROOT)
    return env


def test_a_fresh_host_project_tests_its_agent_and_tool_against_a_live_server(tmp_path):
    root = tmp_path / "host"
    root.mkdir()
    build_host(root)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_weather.py"],
        cwd=root,
        env=host_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert "1 passed" in result.stdout
