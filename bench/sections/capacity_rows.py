"""The capacity section's rows: the count a sweep held (with who was busy where it stopped) and the ratios.

:mod:`bench.sections.capacity` runs the sweeps; this module turns their steps into rows.
"""

from __future__ import annotations

from bench.config import Sizes
from bench.harness import Row, Stat, not_available
from bench.sections.capacity_load import Step

NAME = "capacity"
LIMIT_MS = 100.0
"""A count holds while the steady-state delivery delay p99 is at most this (ms)."""
TARGET_FLOOR_RATIO = 0.7
TARGET_TWO_PROCESS_RATIO = 1.7
CLIENT_BOUND_CORES = 0.85
"""A failing step whose client used at least this many cores was limited by the load generator."""
START_SECONDS_PER_RUN = 0.01
"""Each step's responses last ``capacity_seconds`` plus this per run plus one second, so all overlap."""
LABELS = {
    "helix-db": "helix, database manager (SQLite)",
    "helix-redis": "helix, Redis manager",
    "helix-pg": "helix, database manager (PostgreSQL + channels_redis)",
    "floor": "durable floor (bare SSE + 1 SQLite commit/delta)",
    "bare": "bare ASGI SSE",
    "eventstream": "django-eventstream, database storage",
}


def held(steps: list[Step]) -> int:
    """The largest count of ``steps`` that held (0 when none did)."""
    return max((s.runs for s in steps if s.holds(LIMIT_MS)), default=0)


def count_row(name: str, steps: list[Step], sizes: Sizes, *, redis: bool = False, load: str = "") -> Row:
    """The row of one sweep: the largest count held, the steps and who was busy where it stopped.

    ``redis``: also give redis-server's CPU per delivered delta at the largest count held (and
    PostgreSQL's, when the steps measured it); ``load``: the machine's load during the sweep.
    """
    count = held(steps)
    failing = [s for s in steps if not s.holds(LIMIT_MS)]
    trail = ", ".join(s.describe(LIMIT_MS) for s in steps)
    if failing:
        above = [s for s in failing if s.runs > count] or failing  # a count that failed once, then held, is held
        first = min(above, key=lambda s: s.runs)
        busy = f"at {first.runs}: client {first.client_cores:.2f} cores, servers {first.server_cores:.2f} cores"
        if first.client_cores >= CLIENT_BOUND_CORES:
            busy += "; the load generator was the limit, not the server"
    else:
        busy = f"held up to the sweep's cap ({sizes.capacity_max}): a lower bound"
    top = max((s for s in steps if s.holds(LIMIT_MS)), key=lambda s: s.runs, default=None)
    top = top or min((s for s in steps if s.deltas), key=lambda s: s.runs, default=None)  # none held: the first
    if redis and top is not None and top.deltas:
        busy += f"; redis-server CPU at {top.runs}: {top.redis_seconds / top.deltas * 1e6:.0f} us per delta"
    if top is not None and top.deltas and top.pg_measured:
        busy += (
            f"; PostgreSQL CPU at {top.runs}: {top.pg_seconds / top.deltas * 1e6:.0f} us per delta in the "
            f"database's backends + {top.pg_background_seconds / top.deltas * 1e6:.0f} us in the server's "
            "background processes"
        )
    note = f"{trail}; {busy} (the client shares the cores{'; ' + load if load else ''})"
    return Row(NAME, name, value=Stat.of([count], "runs"), note=note)


def ratio_row(name: str, value: int, base: int, baseline_name: str, limit: float | None, against: str) -> Row:
    """A ratio of two counts with its target (``>= limit x against``; none when ``limit`` is None).

    No verdict when ``base`` is 0.
    """
    ratio = Stat.of([value / base], "x") if base else None
    return Row(
        NAME,
        name,
        value=Stat.of([value], "runs"),
        baseline_name=baseline_name,
        baseline=Stat.of([base], "runs"),
        ratio=ratio,
        target="" if limit is None else f">= {limit:g}x {against}",
        holds=None if ratio is None or limit is None else ratio.median >= limit,
    )


class Adder:
    """Adds one sweep's count row to ``rows`` and its count to ``counts`` (key ``<label>/<processes>``)."""

    def __init__(self, server: str, sizes: Sizes, rows: list[Row], counts: dict[str, int]) -> None:
        self.server, self.sizes, self.rows, self.counts = server, sizes, rows, counts

    def __call__(self, label: str, found: dict, key: str, processes: int) -> None:
        """Add the row of ``found[key]`` (steps, or why the route could not be swept)."""
        name = f"{LABELS[label]} via {self.server}, {processes} process{'es' if processes > 1 else ''}: runs held"
        if isinstance(found[key], str):
            self.rows.append(not_available(NAME, name, found[key]))
            return
        self.counts[f"{label}/{processes}"] = held(found[key])
        redis = "redis" in label or label == "helix-pg" or processes > 1
        self.rows.append(count_row(name, found[key], self.sizes, redis=redis, load=found.get("load", "")))


def ratio_rows(server: str, counts: dict[str, int]) -> list[Row]:
    """The targets: helix / durable floor on one process, two processes / one (per manager)."""
    rows = []
    floor = counts.get("floor/1")
    for label in ("helix-db", "helix-redis", "helix-pg"):
        if f"{label}/1" in counts and floor is not None and label != "helix-pg":
            rows.append(
                ratio_row(
                    f"{LABELS[label]} via {server}: runs held vs the durable floor's",
                    counts[f"{label}/1"],
                    floor,
                    "durable floor, 1 process",
                    TARGET_FLOOR_RATIO,
                    "floor",
                )
            )
        if f"{label}/1" in counts and "eventstream/1" in counts and label != "helix-pg":
            peer = LABELS["eventstream"]
            rows.append(
                ratio_row(
                    f"{LABELS[label]} via {server}: runs held vs the peer's",
                    counts[f"{label}/1"],
                    counts["eventstream/1"],
                    f"{peer}, 1 process",
                    None,
                    "peer",
                )
            )
        if f"{label}/2" in counts and f"{label}/1" in counts:
            extra = " + channels_redis" if label == "helix-db" else ""
            rows.append(
                ratio_row(
                    f"{LABELS[label]}{extra} via {server}: runs held by 2 processes vs 1",
                    counts[f"{label}/2"],
                    counts[f"{label}/1"],
                    "1 process",
                    TARGET_TWO_PROCESS_RATIO,
                    "1 process",
                )
            )
    return rows
    for processes in (1, 2):
        if f"helix-pg/{processes}" in counts and f"helix-db/{processes}" in counts:
            rows.append(
                ratio_row(
                    f"{LABELS['helix-pg']} via {server}, {processes} process{'es' if processes > 1 else ''}: "
                    "runs held vs SQLite's",
                    counts[f"helix-pg/{processes}"],
                    counts[f"helix-db/{processes}"],
                    f"database manager on SQLite, {processes} process{'es' if processes > 1 else ''}",
                    None,
                    "SQLite",
                )
            )
    return rows
