"""Database faults injected at random points of live runs, with a report per fault (issue 21).

``python -m tests.scale.faults [--injections 10] [--faults pg_restart,...] [--seed N]``
prints one JSON report per fault and exits 1 if a target is missed. Each fault gets a
fresh site: a private PostgreSQL (tests/scale/services.py) or a SQLite file (on a small
tmpfs of its own for ``sqlite_disk_full``, which needs root), one daphne process of the
test site with the relaunch scan (``tests.recovery.asgi_recovering``). Per injection a
client sends a message, the fault starts at a random point of the run, the client reads
the stream, resuming from its cursor after a drop, and then sends new messages until
one completes (the server's self-recovery).

One site serves the PostgreSQL faults, another the SQLite ones, in order. Faults: ``pg_restart`` (fast stop, start), ``pg_terminate`` (``pg_terminate_backend`` of
every site connection), ``pg_stop_20s``, ``sqlite_locked_15s`` (another process holds the
write lock), ``sqlite_disk_full`` (the disk fills for 5 s, then is freed). ``HELIX_FAULTS_INLINE_WRITES=1``
runs the site with the database stream manager's ``INLINE_WRITES`` on (SQLite appends
committed on the event loop, :mod:`helix_django.streams.database._group_commit`).

Report per fault: injections, runs completed, typed errors (by code), continuations
(resumes after a drop), chunks lost (stored, never delivered), chunks doubled (a
sequence delivered twice, or stored text repeating), runs left non-terminal, seconds to
self-recovery (max), 5xx answers, untyped 5xx, servers needing a restart. Targets: 0
lost, 0 doubled, 0 untyped 5xx, 0 restarts, 0 non-terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import EventSource

from tests.live import LiveServer
from tests.scale.pgsite import prepare_site
from tests.scale.services import PostgresServer

WORDS = [f"w{i}" for i in range(30)]
PACE_TPS = 10
HELIX = {
    "AGENTS": {
        "default": {
            "PROVIDER": {
                "BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider",
                "OPTIONS": {"TEXT": " ".join(WORDS), "PACE_TPS": PACE_TPS},
            },
            "MODEL": "scripted-1",
            "SYSTEM_PROMPT": "You are a test.",
            "TOOLS": [],
        }
    },
    "LEASE_SECONDS": 3,
    "LEASE_RENEW_SECONDS": 1,
}
NON_TERMINAL = ("starting", "streaming", "tooling", "recovering")
RECOVERY_CAP_SECONDS = 60
PG_FAULTS = ("pg_restart", "pg_terminate", "pg_stop_20s")
SQLITE_FAULTS = ("sqlite_locked_15s", "sqlite_disk_full")
FAULTS = PG_FAULTS + SQLITE_FAULTS


class Site:
    """One daphne process of the test site on a private database: ``kind`` ``pg`` or ``sqlite``.

    The SQLite file lives on a 24 MiB tmpfs of its own when the process may mount one
    (root), so ``sqlite_disk_full`` can fill it.
    """

    def __init__(self, kind: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="helix-faults-")
        self.postgres: PostgresServer | None = None
        self.mounted = False
        helix = dict(HELIX)
        if os.environ.get("HELIX_FAULTS_INLINE_WRITES"):
            manager = {
                "BACKEND": "helix_django.streams.database.DatabaseStreamManager",
                "OPTIONS": {"INLINE_WRITES": True},
            }
            helix["STREAM_MANAGERS"] = {"default": manager}
        env = {"HELIX_TEST_OVERRIDES": json.dumps(helix)}
        if kind == "pg":
            self.postgres = PostgresServer().init()
            env["HELIX_TEST_DATABASE_URL"] = self.postgres.url("helix")
            self.token = prepare_site(self.postgres, "tests.settings", env)
        else:
            if os.geteuid() == 0:
                subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", self.dir], check=True)
                self.mounted = True
            self.sqlite_path = os.path.join(self.dir, "site.sqlite3")
            env["HELIX_SQLITE_PATH"] = self.sqlite_path
            self.token = prepare_site(None, "tests.settings", env)
        self.server = LiveServer(asgi_app="tests.recovery.asgi_recovering:application", env=env).start()

    def rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        """Run a read-only query on the site database (outside the server)."""
        if self.postgres is not None:
            import psycopg

            with psycopg.connect(self.postgres.url("helix"), autocommit=True) as conn:
                return conn.execute(sql.replace("?", "%s"), params).fetchall()
        with contextlib.closing(sqlite3.connect(self.sqlite_path, timeout=60)) as conn:
            return conn.execute(sql, params).fetchall()

    def inject(self, fault: str) -> None:
        """Inject ``fault``; return when it is over (the database is back)."""
        if fault == "pg_restart":
            self.postgres.restart()
        elif fault == "pg_terminate":
            self.postgres.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = 'helix' AND pid <> pg_backend_pid()"
            )
        elif fault == "pg_stop_20s":
            self.postgres.stop()
            time.sleep(20)
            self.postgres.start()
        elif fault == "sqlite_locked_15s":
            with contextlib.closing(sqlite3.connect(self.sqlite_path, timeout=60, isolation_level=None)) as conn:
                conn.execute("BEGIN EXCLUSIVE")
                time.sleep(15)
                conn.execute("ROLLBACK")
        elif fault == "sqlite_disk_full":
            assert self.mounted, "sqlite_disk_full needs root (a tmpfs of its own)"
            filler = os.path.join(self.dir, "filler")
            # Unbuffered: a buffered file's close would flush what the full disk refused and raise.
            with open(filler, "wb", buffering=0) as handle, contextlib.suppress(OSError):
                while True:
                    handle.write(b"\0" * 65536)
            time.sleep(5)
            os.remove(filler)

    def close(self) -> None:
        """Stop the server and the database; remove the files."""
        self.server.stop()
        if self.postgres is not None:
            self.postgres.cleanup()
        if self.mounted:
            subprocess.run(["umount", "-l", self.dir], check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


class Tally:
    """What the clients saw during one fault's injections."""

    def __init__(self) -> None:
        self.statuses: Counter[int] = Counter()
        self.untyped_5xx = 0
        self.typed: Counter[str] = Counter()
        self.continuations = 0

    def answer(self, status: int, body: bytes) -> None:
        """Count a refusal (non-200) and its code; a 5xx without a typed code is untyped."""
        self.statuses[status] += 1
        try:
            code = json.loads(body).get("code")
        except (ValueError, AttributeError):
            code = None
        if code:
            self.typed[code] += 1
        if status >= 500 and (not code or code == "framework_internal_error"):
            self.untyped_5xx += 1


def read_stream(
    client: httpx.Client, method: str, url: str, tally: Tally, got: list, first: list | None = None, **kwargs: Any
) -> str:
    """Read one chat response into ``got`` ([(sequence, chunk)]); return its outcome.

    Terminals (docs/transport.md, "Endings" and "Cursors"): ``done`` ([DONE], or a resume's 204:
    the client holds the whole run), ``error`` (the run's typed error chunk), ``failed`` (a
    resume's typed 409 ``stream_failed``). Else ``drop`` (cut, or a retryable
    ``transport_stream_drop`` error chunk) or ``refused``. ``first`` (when given) receives the
    monotonic time of the first chunk frame.
    """
    try:
        with client.stream(method, url, **kwargs) as response:
            if response.status_code != 200:
                body = response.read()
                tally.answer(response.status_code, body)
                if response.status_code == 204 and method == "GET":
                    return "done"
                if response.status_code == 409 and json.loads(body or b"{}").get("error") == "stream_failed":
                    return "failed"
                return "refused"
            previous_id = None
            for sse in EventSource(response).iter_sse():
                # The SSE last-event-id carries over to events without an ``id:`` line (a drop's error).
                event_id, previous_id = (sse.id if sse.id != previous_id else None), sse.id or previous_id
                if sse.data == "[DONE]":
                    return "done"
                if sse.event == "error":
                    tally.answer(0, sse.data.encode())
                    chunk = json.loads(sse.data)
                    if event_id:
                        got.append((int(event_id), chunk))
                    code = json.loads(chunk.get("errorText") or "{}").get("code")
                    return "drop" if code == "transport_stream_drop" else "error"
                if sse.id and sse.data:  # an id without data (an internal chunk) only moves the cursor
                    got.append((int(sse.id), json.loads(sse.data)))
                    if first is not None and not first:
                        first.append(time.monotonic())
    except httpx.HTTPError:
        return "drop"
    return "drop"


def follow_run(client: httpx.Client, site: Site, sid: str, tally: Tally, got: list, result: dict) -> None:
    """Send in ``sid`` and read to a terminal frame, resuming from the cursor after drops (60 s at most).

    ``result["state"]`` is the last read's outcome (:func:`read_stream`).
    """
    message = {"id": f"u_{uuid.uuid4().hex[:10]}", "role": "user", "parts": [{"type": "text", "text": "hello"}]}
    body = {"id": sid, "messages": [message], "trigger": "submit-message"}
    url = site.server.url(f"/helix/api/sessions/{sid}/chat")
    outcome = read_stream(client, "POST", url, tally, got, json=body)
    deadline = time.monotonic() + 60
    while outcome in ("drop", "refused") and got and time.monotonic() < deadline:
        time.sleep(0.5)
        tally.continuations += 1
        cursor = max(sequence for sequence, _chunk in got)
        outcome = read_stream(client, "GET", url, tally, got, headers={"X-Resume-From-Sequence": str(cursor)})
    result["state"] = outcome


def recover_seconds(client: httpx.Client, site: Site, tally: Tally) -> float | None:
    """Send new messages from the fault's end until one is accepted and completes.

    Return the seconds from the fault's end to that send's first chunk (None: not within the cap).
    """
    started = time.monotonic()
    while time.monotonic() - started < RECOVERY_CAP_SECONDS:
        got: list = []
        sid = f"chat_{uuid.uuid4().hex[:16]}"
        message = {"id": f"u_{uuid.uuid4().hex[:10]}", "role": "user", "parts": [{"type": "text", "text": "again"}]}
        body = {"id": sid, "messages": [message], "trigger": "submit-message"}
        first: list[float] = []
        outcome = read_stream(
            client, "POST", site.server.url(f"/helix/api/sessions/{sid}/chat"), tally, got, json=body, first=first
        )
        if outcome == "done" and first:
            return first[0] - started
        time.sleep(0.5)
    return None


def check_run(site: Site, sid: str, got: list, *, told_failed: bool = False) -> dict[str, int]:
    """Compare what the client got with what the stream stored; wait for the run to be terminal (30 s).

    With ``told_failed`` (a resume answered the typed 409 ``stream_failed``), what the stream
    holds after the client's cursor reached it as that answer, which sends it to the snapshot
    (docs/transport.md, "Cursors"): not lost.
    """
    deadline = time.monotonic() + 30
    while True:
        statuses = [row[0] for row in site.rows("SELECT status FROM helix_django_run WHERE session_id = ?", (sid,))]
        if all(status not in NON_TERMINAL for status in statuses) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    stored = [
        (sequence, json.loads(payload) if isinstance(payload, str) else payload)
        for sequence, payload in site.rows(
            "SELECT sequence, payload FROM helix_django_streamchunk WHERE stream_id = ?", (sid,)
        )
    ]
    cursor = max((sequence for sequence, _chunk in got), default=0)
    delivered = {
        sequence
        for sequence, chunk in stored
        if not chunk.get("type", "").startswith("helix-") and not (told_failed and sequence > cursor)
    }
    received = [sequence for sequence, _chunk in got]
    doubled = len(received) - len(set(received))
    text = "".join(chunk.get("delta", "") for _s, chunk in sorted(stored) if chunk.get("type") == "text-delta").split()
    if text != WORDS[: len(text)]:
        doubled += 1  # the stored text repeats or skips words (a batch written twice)
    if os.environ.get("HELIX_FAULTS_VERBOSE"):
        print(
            "undelivered:", [c for q, c in stored if q in delivered - set(received)], "got", got[-2:], file=sys.stderr
        )
    return {
        "lost": len(delivered - set(received)),
        "doubled": doubled,
        "non_terminal": sum(status in NON_TERMINAL for status in statuses),
        "completed": sum(status == "completed" for status in statuses),
        **{f"ended {status}": 1 for status in statuses if status != "completed"},
    }


def run_fault(site: Site, fault: str, injections: int, rng: random.Random) -> dict[str, Any]:
    """Inject ``fault`` ``injections`` times at random points of live runs on ``site``; return its report."""
    tally = Tally()
    report: dict[str, Any] = {"fault": fault, "injections": injections, "lost": 0, "doubled": 0, "non_terminal": 0}
    report.update({"completed": 0, "recovery_seconds_max": 0.0, "needs_restart": 0})
    headers = {"Authorization": f"Token {site.token}"}
    with httpx.Client(headers=headers, timeout=httpx.Timeout(30, read=60)) as client:
        for _ in range(injections):
            sid, got, outcome = f"chat_{uuid.uuid4().hex[:16]}", [], {}
            reader = threading.Thread(target=follow_run, args=(client, site, sid, tally, got, outcome))
            reader.start()
            time.sleep(rng.uniform(0.3, 0.8 * len(WORDS) / PACE_TPS))
            site.inject(fault)
            seconds = recover_seconds(client, site, tally)
            reader.join(120)
            if seconds is None:
                report["needs_restart"] += 1
                site.server.restart()
            else:
                report["recovery_seconds_max"] = round(max(report["recovery_seconds_max"], seconds), 2)
            for key, value in check_run(site, sid, got, told_failed=outcome.get("state") == "failed").items():
                report[key] = report.get(key, 0) + value
    report.update(
        {
            "continuations": tally.continuations,
            "typed_errors": dict(tally.typed),
            "5xx": sum(count for status, count in tally.statuses.items() if status >= 500),
            "untyped_5xx": tally.untyped_5xx,
        }
    )
    return report


def misses(report: dict[str, Any]) -> list[str]:
    """Return the targets ``report`` misses (empty when it meets them all)."""
    return [key for key in ("lost", "doubled", "untyped_5xx", "needs_restart", "non_terminal") if report[key]]


def main(argv: list[str] | None = None) -> int:
    """Run the selected faults and print their reports (one JSON line each); 1 if a target is missed."""
    parser = argparse.ArgumentParser(prog="python -m tests.scale.faults", description=__doc__.splitlines()[0])
    parser.add_argument("--injections", type=int, default=10)
    parser.add_argument("--faults", default=",".join(FAULTS))
    parser.add_argument("--seed", type=int, default=21)
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    rng = random.Random(args.seed)
    failed = False
    for kind, faults in (("pg", PG_FAULTS), ("sqlite", SQLITE_FAULTS)):
        chosen = [fault for fault in args.faults.split(",") if fault in faults]
        if not chosen:
            continue
        site = Site(kind)
        try:
            for fault in chosen:
                report = run_fault(site, fault, args.injections, rng)
                failed = failed or bool(misses(report))
                print(json.dumps(report), flush=True)
        finally:
            site.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    sys.exit(main())
