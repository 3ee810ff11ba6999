"""Runtime fixtures: a fresh executor, sessions, agents configured per test, stream helpers."""

from __future__ import annotations

import itertools

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.test import override_settings

from helix_django import store
from helix_django.models import Message
from helix_django.protocol import MessageAccumulator, to_ui_chunk
from helix_django.runtime.executor import LocalExecutor
from helix_django.streams import get_stream_manager

_ids = itertools.count(1)

SCRIPTED = "helix_django.runtime.providers.scripted.ScriptedProvider"


def agent(options: dict | None = None, *, tools: list | None = None, **extra) -> dict:
    """An AGENTS entry using the scripted provider with ``options``."""
    return {
        "PROVIDER": {"BACKEND": SCRIPTED, "OPTIONS": options or {}},
        "MODEL": "scripted-1",
        "SYSTEM_PROMPT": "You are a test assistant.",
        "TOOLS": tools or [],
        **extra,
    }


def helix(**agents) -> dict:
    """A HELIX setting with these agents (``default`` among them) and fast flushes."""
    return {"AGENTS": agents, "FLUSH_INTERVAL_MS": 2, "LEASE_RENEW_SECONDS": 0.2, "LEASE_SECONDS": 5}


@pytest.fixture
def use_agents():
    """Call ``use_agents(default=agent(...))`` to configure agents for the rest of the test."""
    overrides = []

    def apply(**agents):
        o = override_settings(HELIX=helix(**agents))
        o.enable()
        overrides.append(o)

    yield apply
    for o in reversed(overrides):
        o.disable()


@pytest.fixture(autouse=True)
async def _close_worker_thread_connections():
    """Close the ORM connections of asgiref's shared worker thread (runs use it), so the
    test database can be dropped at the end (PostgreSQL refuses while a session is open)."""
    yield
    await sync_to_async(connections.close_all)()


@pytest.fixture
def executor():
    executor = LocalExecutor()
    yield executor
    executor.close()


@pytest.fixture
async def session():
    session, _ = await store.aget_or_create_session(f"sess-{next(_ids)}")
    return session


def user_message(text: str, message_id: str | None = None) -> dict:
    return {"id": message_id or f"u{next(_ids)}", "role": "user", "parts": [{"type": "text", "text": text}]}


async def stream_chunks(session_id: str, after: int = 0) -> list[tuple[int, dict]]:
    """Every stored chunk of the session stream after ``after``."""
    return await get_stream_manager().read_all(session_id, after=after)


def run_chunks(chunks: list[tuple[int, dict]], run_id: str) -> list[dict]:
    return [c for _s, c in chunks if c.get("_run") == run_id]


def accumulate(chunks: list[dict], message_id: str, parts=None, metadata=None) -> dict:
    """Build a message from UI chunks as the AI SDK client does (superseded attempts dropped)."""
    acc = MessageAccumulator(message_id, parts=parts, metadata=metadata)
    for chunk in chunks:
        ui = to_ui_chunk(chunk)
        if ui is not None:
            acc.apply(ui)
    return acc.snapshot()


@sync_to_async
def rows(session_id: str) -> list[dict]:
    return [
        m.to_ui_message()
        for m in Message.objects.filter(session_id=session_id, position__isnull=False).order_by("position")
    ]


def text(message: dict) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p.get("type") == "text")
