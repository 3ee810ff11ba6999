"""A side effect that counts its real executions in a file, and a model that rewords it on every run.

``send_email`` appends one JSON line to the file named by ``HELIX_TEST_OUTBOX`` per real
execution (a live server in another process writes the same file); its effect is
identified by ``to`` and ``subject``, not by the body. :class:`RewordingProvider` asks for
``send_email`` with a body naming the run that asks, so every attempt rewords the call as
a real model would. After a ``send_email`` result sent by its own run the text step takes
the ``OWN_EFFECT`` options (e.g. ``FAIL_AFTER_CHUNKS``, ``HANG_AFTER_CHUNKS``): the first
run is interrupted right after its side effect, a run answered with an earlier run's email
finishes. Each model call's messages are kept in :attr:`RewordingProvider.requests` and, when
``HELIX_TEST_MODEL_LOG`` names a file, appended to it as ``{"run": id, "messages": [...]}``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from helix_django.runtime.providers.scripted import ScriptedProvider
from helix_django.runtime.tools import tool

OUTBOX_ENV = "HELIX_TEST_OUTBOX"
MODEL_LOG_ENV = "HELIX_TEST_MODEL_LOG"
PATH = "tests.runtime.effects"


@tool(effect="side_effect", effect_key=("to", "subject"))
def send_email(to: str, subject: str, body: str) -> dict:
    """Send an email (one line of the outbox file per real execution)."""
    with open(os.environ[OUTBOX_ENV], "a", encoding="utf-8") as outbox:
        outbox.write(json.dumps({"to": to, "subject": subject, "body": body}) + "\n")
    return {"sent": True, "to": to, "subject": subject, "body": body}


def _lines(env: str) -> list[dict[str, Any]]:
    path = Path(os.environ[env])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def sent() -> list[dict[str, Any]]:
    """Return the emails ``send_email`` really sent, oldest first."""
    return _lines(OUTBOX_ENV)


def model_log() -> list[dict[str, Any]]:
    """Return the model calls logged to ``HELIX_TEST_MODEL_LOG``, oldest first."""
    return _lines(MODEL_LOG_ENV)


def _since_last_user(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    tail: list[dict[str, Any]] = []
    for message in reversed(messages):
        if message.get("role") == "user":
            break
        tail.append(message)
    return tail


class RewordingProvider(ScriptedProvider):
    """The scripted provider whose ``send_email`` body names the run asking (module docstring)."""

    requests: list[Any] = []

    def plan(self, request: Any) -> dict[str, Any]:
        RewordingProvider.requests.append(request)
        if os.environ.get(MODEL_LOG_ENV):
            with open(os.environ[MODEL_LOG_ENV], "a", encoding="utf-8") as log:
                log.write(json.dumps({"run": request.run_id, "messages": request.messages}) + "\n")
        config = super().plan(request)
        calls = config.get("TOOL_CALLS") or []
        if calls:
            config["TOOL_CALLS"] = [
                {**call, "arguments": {**call["arguments"], "body": f"Sent by {request.run_id}"}}
                if call["name"] == "send_email"
                else call
                for call in calls
            ]
        elif any(
            m.get("role") == "tool" and f"Sent by {request.run_id}" in str(m.get("content"))
            for m in _since_last_user(request.messages)
        ):
            config.update(self.options.get("OWN_EFFECT") or {})
        return config


def told_of(messages: list[dict[str, Any]], run_id: str) -> bool:
    """Whether ``messages`` hold the ``send_email`` call and the result that run ``run_id`` sent."""
    called = any(
        any(call["name"] == "send_email" for call in m.get("tool_calls") or [])
        for m in messages
        if m.get("role") == "assistant"
    )
    answered = any(m.get("role") == "tool" and f"Sent by {run_id}" in str(m.get("content")) for m in messages)
    return called and answered
