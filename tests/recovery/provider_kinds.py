"""The provider kinds of the per-kind recovery campaign (tests/recovery/kind_campaign.py).

A kind is what a SIGKILLed run's provider leaves behind: ``ephemeral`` (the scripted
provider's plain stream: nothing outlives the process, every killed run ends
``interrupted``), ``scripted-durable`` (the scripted provider's DURABLE operations, kept in
the shared ``helix`` cache) and ``openai-background`` (the real ``openai`` SDK, Responses
API in background mode, against a paced :class:`~helix_django.testing.FakeOpenAI`). Each
kind gives the server's ``HELIX``, the answer every run of it streams, and its orphans: the
operations still ``in_progress`` at the provider (000, "Background operations are easier to
recover than ephemeral streams").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync

from helix_django.runtime.providers.scripted import ScriptedProvider
from helix_django.testing import FakeOpenAI, Reply
from tests.recovery.live_chat import REPLY, agent, openai_helix

#: Leases far longer than a campaign cycle: only a restart knowing its predecessor is gone
#: tells the truth in time (000, "Recovery on app relaunch").
LEASE = {"LEASE_SECONDS": 120, "LEASE_RENEW_SECONDS": 10, "DRAIN_SECONDS": 1}
SCRIPTED_PACE_TPS = 8
"""41 tokens at 8 per second: an answer runs about 5 s, killed within its first 2."""
OPENAI_ANSWER = " ".join(f"token{i}" for i in range(40)) + "."
OPENAI_INTERVAL_SECONDS = 0.12
"""40 deltas 0.12 s apart: a background response runs about 5 s."""
DURABLE_OPTIONS = {"TEXT": REPLY, "PACE_TPS": SCRIPTED_PACE_TPS, "DURABLE": True, "CACHE_ALIAS": "helix"}


@dataclasses.dataclass
class Kind:
    """One provider kind: its name, whether its operations outlive a process, and its parts."""

    name: str
    durable: bool
    answer: str
    """The full text every run of this kind streams."""
    helix: Callable[[], dict[str, Any]]
    """The server's ``HELIX`` overrides."""
    queue: Callable[[int], None]
    """Queue the provider's answers of ``n`` runs about to start."""
    orphans: Callable[[list[Any]], int]
    """Operations of the given runs (``Run`` rows) still ``in_progress`` at the provider."""


def _no_orphans(runs: list[Any]) -> int:
    return 0  # an ephemeral stream keeps nothing at the provider


def _scripted_in_progress(runs: list[Any]) -> int:
    provider = ScriptedProvider(DURABLE_OPTIONS)
    retrieve = async_to_sync(provider.retrieve)
    return sum(
        1 for run in runs if run.provider_operation_id and retrieve(run.provider_operation_id).status == "in_progress"
    )


def ephemeral() -> Kind:
    """The scripted provider's plain stream: a killed run cannot go on anywhere."""
    return Kind(
        name="ephemeral",
        durable=False,
        answer=REPLY,
        helix=lambda: {**agent({"TEXT": REPLY, "PACE_TPS": SCRIPTED_PACE_TPS}), **LEASE},
        queue=lambda n: None,
        orphans=_no_orphans,
    )


def scripted_durable() -> Kind:
    """The scripted provider's DURABLE operations: they go on in the ``helix`` cache's timeline."""
    return Kind(
        name="scripted-durable",
        durable=True,
        answer=REPLY,
        helix=lambda: {**agent(DURABLE_OPTIONS), **LEASE},
        queue=lambda n: None,
        orphans=_scripted_in_progress,
    )


def openai_background(fake: FakeOpenAI) -> Kind:
    """The real ``openai`` SDK in Responses background mode against ``fake`` (paced responses)."""

    def queue(n: int) -> None:
        fake.replies.extend(Reply(text=OPENAI_ANSWER, interval_seconds=OPENAI_INTERVAL_SECONDS) for _ in range(n))

    def orphans(runs: list[Any]) -> int:
        return sum(1 for record in fake.responses.values() if fake.status_of(record) == "in_progress")

    return Kind(
        name="openai-background",
        durable=True,
        answer=OPENAI_ANSWER,
        helix=lambda: {**openai_helix(fake), **LEASE},
        queue=queue,
        orphans=orphans,
    )
