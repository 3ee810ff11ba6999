"""The recovery campaign per provider kind: SIGKILL live runs of each kind, restart, and count how each ended.

For each kind of tests/recovery/provider_kinds.py, each cycle starts a daphne server whose
ASGI app runs the relaunch scan (tests/recovery/asgi_recovering.py), sends a few chats over
the real chat route, SIGKILLs the server at a random point of their answers and starts it
again. The restarted process must tell every killed run's truth (000, "Recovery on app
relaunch"): an ephemeral run ends ``interrupted`` with its typed ``run_interrupted`` error
on the chat route from the client's cursor; a durable one goes on as the same run (``reattached``: the
rest of the text exactly once, then ``finish``) or, when its operation ended while no
server was up, is completed from the provider's final output (a ``data-stream-resync``).
Counted per kind (tests/recovery/kind_figures.py), with the seconds from the new process's
start to that truth, and the operations left ``in_progress`` at the provider.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from tests.recovery.kind_figures import TRUTH_BOUND_SECONDS, KindFigures
from tests.recovery.provider_kinds import Kind

APP = "tests.recovery.asgi_recovering:application"
ENDINGS = ("text-delta", "data-stream-resync", "finish", "error")
"""Chunks of a resumed read that tell the run's truth (its rest goes on, or it ended)."""


def _deltas(chat: Any) -> int:
    return sum(1 for _s, c in chat.chunks if c.get("type") == "text-delta")


def _wait(condition: Any, timeout: float) -> bool:
    """Poll ``condition()`` every 50 ms until it holds (True) or ``timeout`` seconds passed (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def kill_cycle(server: Any, kind: Kind, figures: KindFigures, rng: random.Random, runs: int) -> list[str]:
    """Start ``runs`` chats, SIGKILL the server mid-answer, restart it and judge every killed run.

    Returns the ids of the cycle's runs (killed or not), for the orphan count.
    """
    from tests.recovery.live_chat import LiveChat, user_token

    headers = user_token()
    server.helix = kind.helix()
    kind.queue(runs)
    server.start()
    chats = [LiveChat(server, headers) for _ in range(runs)]
    readers = [threading.Thread(target=c.send, kwargs={"until": lambda _c: False, "timeout": 60}) for c in chats]
    for reader in readers:
        reader.start()
        time.sleep(rng.uniform(0.0, 0.3))
    _wait(lambda: all(_deltas(c) >= 3 for c in chats), 30)
    time.sleep(rng.uniform(0.0, 1.5))  # a random point of the answers
    server.kill()
    for reader in readers:
        reader.join(30)
    killed = []
    for chat in chats:
        run = chat.run()
        if run is None or run.status != "streaming":
            figures.finished_before_kill += 1
            continue
        figures.killed += 1
        killed.append((chat, run.id, chat.chunks[-1][0] if chat.chunks else 0))
    restarted = time.monotonic()
    server.start()
    if kind.durable:
        _judge_durable(kind, figures, killed, restarted)
    else:
        _judge_ephemeral(server, figures, killed, restarted, headers)
    server.stop()
    return [chat.run().id for chat in chats if chat.run() is not None]


def _judge_ephemeral(server: Any, figures: KindFigures, killed: list, restarted: float, headers: dict) -> None:
    """Time each killed run's end (its first request starts the scan), then read its ending from the cursor."""
    from helix_django.models import Run
    from tests.recovery.wire_endings import chat_ends_with_typed_error, read_chat

    if not killed:
        return
    chat, _run_id, cursor = killed[0]
    first_call = threading.Thread(target=read_chat, args=(server, chat.session_id, headers), kwargs={"cursor": cursor})
    first_call.start()
    pending = {run_id for _c, run_id, _cursor in killed}
    while pending and time.monotonic() - restarted < TRUTH_BOUND_SECONDS * 2:
        for run_id in list(pending):
            if Run.objects.get(id=run_id).status != "streaming":
                figures.truth_seconds.append(time.monotonic() - restarted)
                pending.discard(run_id)
        time.sleep(0.05)
    first_call.join(30)
    for chat, run_id, cursor in killed:
        run = Run.objects.get(id=run_id)
        if run.status != "interrupted":
            figures.left_streaming += run.status == "streaming"
            figures.notes.append(f"{run_id} ended {run.status}")
            continue
        figures.interrupted += 1
        items = read_chat(server, chat.session_id, headers, cursor=cursor)
        if chat_ends_with_typed_error(items, "run_interrupted"):
            figures.typed += 1
        else:
            figures.notes.append(f"{run_id} from {cursor}: {items[-2:]}")


def _judge_durable(kind: Kind, figures: KindFigures, killed: list, restarted: float) -> None:
    """Resume every killed run from its cursor through the restart; classify how it ended."""
    rests: dict[str, Any] = {}

    def resume(chat: Any, run_id: str, cursor: int) -> None:
        try:
            rests[run_id] = chat.resume_through(cursor, seconds=60)
        except AssertionError as exc:  # it never ended on the wire
            rests[run_id] = exc

    threads = [threading.Thread(target=resume, args=k) for k in killed]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    for chat, run_id, _cursor in killed:
        _classify(kind, figures, chat, run_id, rests.get(run_id), restarted)


def _classify(kind: Kind, figures: KindFigures, chat: Any, run_id: str, rest: Any, restarted: float) -> None:
    """Count one durable run: re-attached, completed from the provider, interrupted, or a note."""
    from helix_django.models import Message, Run

    if not isinstance(rest, list):
        figures.notes.append(f"{run_id}: {rest!r}")
        figures.left_streaming += Run.objects.get(id=run_id).status == "streaming"
        return
    truth = next((t for t, _s, c in rest if c.get("type") in ENDINGS), None)
    if truth is not None:
        figures.truth_seconds.append(truth - restarted)
    _wait(lambda: Run.objects.get(id=run_id).status != "streaming", 10)  # the finish chunk may precede the row
    run = Run.objects.get(id=run_id)
    chunks = [c for _t, _s, c in rest]
    text = "".join(c["delta"] for c in chunks if c.get("type") == "text-delta")
    resynced = any(c.get("type") == "data-stream-resync" for c in chunks)
    one_run = Run.objects.filter(session_id=chat.session_id).count() == 1
    answer = Message.objects.filter(session_id=chat.session_id, position=1).first()
    if run.status == "interrupted":
        figures.interrupted += 1
    elif run.status != "completed" or not one_run or answer is None or answer.text != kind.answer:
        figures.left_streaming += run.status == "streaming"
        figures.notes.append(f"{run_id} ended {run.status}, one run {one_run}, answer {answer and answer.text[-40:]!r}")
    elif resynced:
        figures.completed += 1
    elif chunks and chunks[-1].get("type") == "finish" and chat.text + text == kind.answer:
        figures.reattached += 1
    else:
        figures.notes.append(f"{run_id}: rest {text[:40]!r}... ends {chunks[-1:] if chunks else 'empty'}")


def campaign(kinds: list[Kind], *, kills: int = 2, runs_per_kill: int = 2, seed: int = 40) -> list[KindFigures]:
    """Run ``kills`` cycles of ``runs_per_kill`` chats for each kind; return each kind's figures.

    The database must be visible to server processes (the live test database of a
    ``transaction=True`` test).
    """
    from helix_django.models import Run
    from tests.live import LiveServer

    rng = random.Random(seed)
    results = []
    for kind in kinds:
        figures = KindFigures(kind.name, kind.durable)
        server = LiveServer(asgi_app=APP, helix=kind.helix())
        run_ids: list[str] = []
        try:
            for _ in range(kills):
                run_ids += kill_cycle(server, kind, figures, rng, runs_per_kill)
        finally:
            server.stop()
        figures.orphans = kind.orphans(list(Run.objects.filter(id__in=run_ids)))
        results.append(figures)
    return results
