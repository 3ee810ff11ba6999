"""Runtime: the scripted provider at pace 0 through the executor into the database manager (issue 3).

Per repeat: the provider alone streams a ``runtime_chunks``-token reply (events/s), then
the same reply goes through ``LocalExecutor.execute`` (run-start commit, claim, agent
loop, stream writer, step and terminal commits) into the database stream manager on
SQLite, timed from ``execute()`` until a reader following the session stream from the
handle's cursor got the run's last chunk. Reported: provider deltas/s delivered end to end, the
provider's deltas/s, and the overhead per delta = (end to end - provider alone) / deltas.
"""

from __future__ import annotations

import importlib.util
import statistics
import time

from bench.config import Sizes
from bench.harness import Row, Stat, not_available, paired_ratio
from bench.payloads import unique

NAME = "runtime"
SCRIPTED = "helix_django.runtime.providers.scripted.ScriptedProvider"
LONG_FACTOR = 100
"""The long reply is this many times the section's reply (200 000 tokens, 1.5 MB; 100 000 with --quick)."""
LONG_TARGET_RATIO = 1.5


def missing() -> str:
    """Return why the runtime cannot be measured, or '' when it can."""
    for module in ("helix_django.runtime.executor", "helix_django.runtime.providers.scripted"):
        if importlib.util.find_spec(module) is None:
            return f"{module} has not landed"
    from helix_django.runtime import executor

    if not hasattr(executor.LocalExecutor, "execute"):
        return "LocalExecutor.execute has not landed"
    return ""


def reply_text(tokens: int) -> str:
    """Return a reply of exactly ``tokens`` word tokens."""
    return "".join(f"w{i} " for i in range(tokens))


def helix_setting(options: dict) -> dict:
    """Return a HELIX dict whose default agent is the scripted provider with ``options``."""
    from django.conf import settings

    return {
        **settings.HELIX,
        "AGENTS": {
            "default": {
                "PROVIDER": {"BACKEND": SCRIPTED, "OPTIONS": options},
                "MODEL": "scripted-1",
                "SYSTEM_PROMPT": "You are a benchmark.",
                "TOOLS": [],
            }
        },
    }


async def provider_alone(options: dict) -> tuple[float, int]:
    """Stream one reply from the provider with no persistence; return (seconds, text deltas)."""
    from helix_django.runtime.providers.base import ProviderRequest, TextDelta
    from helix_django.runtime.providers.scripted import ScriptedProvider

    provider = ScriptedProvider(options)
    request = ProviderRequest(model="scripted-1", system="", messages=[{"role": "user", "content": "bench"}])
    started = time.perf_counter()
    deltas = 0
    async for event in provider.stream(request):
        deltas += isinstance(event, TextDelta)
    return time.perf_counter() - started, deltas


async def through_executor(executor) -> tuple[float, int]:
    """Send one message through ``executor`` and follow the stream to the run's end; return (seconds, chunks)."""
    from helix_django import store
    from helix_django.streams import get_stream_manager

    session, _created = await store.aget_or_create_session(unique("bench_rt"))
    message = {"id": unique("u"), "role": "user", "parts": [{"type": "text", "text": "bench"}]}
    started = time.perf_counter()
    handle = await executor.execute(session, [message])
    reader = await get_stream_manager().create_resumable_reader(
        session.stream_id, from_sequence=handle.from_sequence, wait_for_live=True
    )
    chunks = 0
    async for _sequence, _chunk in reader:
        chunks += 1
    elapsed = time.perf_counter() - started
    status = await executor.wait(handle.run_id, 30)
    assert status in (None, "completed"), status
    return elapsed, chunks


async def run(sizes: Sizes) -> list[Row]:
    """Return the end-to-end, provider-alone and overhead rows."""
    reason = missing()
    if reason:
        return [not_available(NAME, "executor + scripted provider (pace 0) -> database/sqlite", reason)]
    from django.test import override_settings

    from helix_django.runtime.executor import LocalExecutor

    options = {"TEXT": reply_text(sizes.runtime_chunks), "PACE_TPS": 0}
    long_options = {"TEXT": reply_text(sizes.runtime_chunks * LONG_FACTOR), "PACE_TPS": 0}
    rates, provider_rates, overheads, per_delta, long_overheads = [], [], [], [], []
    deltas = long_deltas = 0
    with override_settings(HELIX=helix_setting(options)):
        executor = LocalExecutor()
        await through_executor(executor)  # warm-up: imports, first connection
        for _ in range(sizes.repeats):
            provider_seconds, deltas = await provider_alone(options)
            seconds, chunks = await through_executor(executor)
            rates.append(deltas / seconds)
            per_delta.append(chunks / deltas)
            provider_rates.append(deltas / provider_seconds)
            overheads.append((seconds - provider_seconds) / deltas * 1e6)
            with override_settings(HELIX=helix_setting(long_options)):
                provider_seconds, long_deltas = await provider_alone(long_options)
                seconds, _chunks = await through_executor(LocalExecutor())
            long_overheads.append((seconds - provider_seconds) / long_deltas * 1e6)
    name = f"{deltas:,}-token reply"
    growth = paired_ratio(long_overheads, overheads)
    return [
        Row(
            NAME,
            f"{long_deltas:,}-token reply: overhead per delta, as a multiple of the {name}'s",
            value=Stat.of(long_overheads, "us"),
            baseline_name=f"{name}: overhead per delta",
            baseline=Stat.of(overheads, "us"),
            ratio=growth,
            target=f"<= {LONG_TARGET_RATIO:g}x (a delta's work does not grow with the answer)",
            holds=growth.median <= LONG_TARGET_RATIO,
            note="the run's message is built from every delta: joined once per read, not copied per delta",
        ),
        Row(
            NAME,
            f"{name}: executor -> database/sqlite, deltas/s delivered",
            value=Stat.of(rates, "deltas/s"),
            baseline_name="provider alone, deltas/s",
            baseline=Stat.of(provider_rates, "deltas/s"),
            ratio=paired_ratio(rates, provider_rates),
            note=f"stored chunks per provider delta: {statistics.median(per_delta):.2f} (coalescing)",
        ),
        Row(
            NAME,
            f"{name}: overhead per delta over the provider alone",
            value=Stat.of(overheads, "us"),
            note="run-start/step/terminal commits included, spread over the reply's deltas",
        ),
    ]
