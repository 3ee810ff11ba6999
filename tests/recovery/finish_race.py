"""The reconcile-vs-finish race: staff *Mark interrupted* fired around a live run's finish (issue 17).

A daphne server streams short answers; a chat-route reader times every event it gets. When
the reader is a few tokens from the end, the staff action
(:func:`helix_django.recovery.actions.aperform` ``mark_interrupted``, the admin's own call)
is fired from this process after a random delay, so it lands within about ±50 ms of the
finish. A flip is a run whose status disagrees with what a client was told: a ``finish``
reached a client and the run did not end ``completed``, or the run ended ``interrupted``
and its stream holds a ``finish``, or it ended ``completed`` and the client was told an error.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from typing import Any

from asgiref.sync import async_to_sync

from helix_django.errors import HelixError
from helix_django.recovery import inventory as inv
from helix_django.recovery.actions import aperform

ANSWER = " ".join(f"tok{i}" for i in range(12)) + "."
PACE_TPS = 50
TOKENS_BEFORE_FIRE = 3
"""Tokens before the end when the delay starts: about 60 ms before the finish at PACE_TPS."""


def _helix() -> dict[str, Any]:
    from tests.recovery.live_chat import agent

    return agent({"TEXT": ANSWER, "PACE_TPS": PACE_TPS})


def _race_one(server: Any, headers: dict[str, str], rng: random.Random, figures: Any) -> None:
    from helix_django.streams import get_stream_manager
    from tests.recovery.kill_campaign import latest_run, wait
    from tests.recovery.wire_endings import chat_ends_with_typed_error, read_chat

    session_id = f"chat_{uuid.uuid4().hex[:16]}"
    message = {"id": f"u_{uuid.uuid4().hex[:10]}", "role": "user", "parts": [{"type": "text", "text": "Race me."}]}
    body = {"id": session_id, "messages": [message], "trigger": "submit-message"}
    timed: list[tuple[float, Any]] = []
    items: list[Any] = []

    def read() -> None:
        items.extend(
            read_chat(server, session_id, headers, body=body, on_item=lambda i: timed.append((time.monotonic(), i)))
        )

    reader = threading.Thread(target=read)
    reader.start()
    total = len(ANSWER.split())
    wait(
        lambda: (
            sum(isinstance(i, dict) and i.get("type") == "text-delta" for _t, i in timed) >= total - TOKENS_BEFORE_FIRE
        )
    )
    time.sleep(rng.uniform(0.0, 0.12))
    fired_at = time.monotonic()
    run = latest_run(session_id)
    try:
        async_to_sync(aperform)(inv.MARK_INTERRUPTED, run.id)
    except HelixError:
        pass  # the run ended first: the action is no longer offered
    reader.join(30)
    wait(lambda: not latest_run(session_id).is_live, timeout=15)
    run = latest_run(session_id)
    finish_at = next((t for t, i in timed if isinstance(i, dict) and i.get("type") == "finish"), None)
    stored = [c for _s, c in async_to_sync(get_stream_manager().read_all)(session_id)]
    figures.races += 1
    figures.race_finish_seen += finish_at is not None
    figures.race_interrupted += run.status == "interrupted"
    end_at = finish_at or next((t for t, _i in reversed(timed)), fired_at)
    figures.race_within_50ms += abs(fired_at - end_at) <= 0.05
    told_error = chat_ends_with_typed_error(items, run.error_code or "run_interrupted")
    flipped = (
        (finish_at is not None and run.status != "completed")
        or (run.status == "interrupted" and any(c.get("type") == "finish" for c in stored))
        or (run.status == "completed" and told_error)
    )
    if flipped:
        figures.bad_race_flips += 1
        figures.notes.append(f"race {session_id}: status={run.status} finish_seen={finish_at is not None}")


def race_finishes(count: int, figures: Any, rng: random.Random) -> None:
    """Run ``count`` races on one live server; add their figures to ``figures``."""
    from django.conf import settings
    from django.test import override_settings

    from tests.live import LiveServer
    from tests.recovery.live_chat import user_token

    headers = user_token()
    with override_settings(HELIX={**settings.HELIX, **_helix()}), LiveServer(helix=_helix()) as server:
        for _ in range(count):
            _race_one(server, headers, rng, figures)
