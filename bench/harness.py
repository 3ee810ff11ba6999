"""Measurement helpers: repeated samples, medians, paired baselines, the table and the JSON.

A row holds a measured value and, when it has one, its baseline measured in the same
repeat (paired samples), the median of the per-repeat ratios, the target and whether it
holds. Absolute numbers are printed for context only: this machine is shared and noisy,
so a target is judged on the median ratio (or on the median itself where the issue
names an absolute bound).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import statistics
import time
from collections.abc import Sequence
from typing import Any


@dataclasses.dataclass
class Stat:
    """Median and range of repeated samples (``unit``: e.g. ``chunks/s``, ``ms``, ``x``)."""

    median: float
    min: float
    max: float
    samples: list[float]
    unit: str

    @classmethod
    def of(cls, samples: Sequence[float], unit: str) -> Stat:
        """Return the stat of ``samples`` (at least one)."""
        values = [float(s) for s in samples]
        return cls(statistics.median(values), min(values), max(values), values, unit)


@dataclasses.dataclass
class Row:
    """One line of the table: a measurement, its same-run baseline and its target."""

    section: str
    name: str
    value: Stat | None = None
    baseline_name: str = ""
    baseline: Stat | None = None
    ratio: Stat | None = None
    """Median/min/max of the per-repeat ratios value/baseline (or large/small history)."""
    target: str = ""
    holds: bool | None = None
    note: str = ""
    available: bool = True

    def to_json(self) -> dict[str, Any]:
        """Return the row as a JSON-able dict."""
        return dataclasses.asdict(self)


def not_available(section: str, name: str, reason: str) -> Row:
    """Return a row for a measurement whose code has not landed (never a failure)."""
    return Row(section, name, note=f"not available: {reason}", available=False)


def skipped(section: str, name: str, reason: str) -> Row:
    """Return a row for a measurement this machine cannot make (a service is missing; never a failure)."""
    return Row(section, name, note=f"skipped: {reason}", available=False)


def paired_ratio(values: Sequence[float], baselines: Sequence[float]) -> Stat:
    """Return the stat of per-repeat ratios ``values[i] / baselines[i]``."""
    return Stat.of([v / b for v, b in zip(values, baselines, strict=True) if b], "x")


def delay_rows(
    section: str,
    name: str,
    values: dict[str, list[float]],
    bases: dict[str, list[float]],
    *,
    baseline_name: str,
    target_p99_ms: float | None,
    cpu: str,
    memory: tuple[str, str],
    cpu_note: str = "",
    ratio_targets: dict[str, float] | None = None,
) -> list[Row]:
    """Return the four rows of a live-delivery configuration: delay p50, p99, CPU, memory.

    ``values``/``bases`` hold per-repeat samples under ``p50``, ``p99`` (ms), ``cpu`` (s per
    1 000 deltas) and ``memory[0]`` (KiB); ``memory[1]`` labels that row. Every row carries
    the paired ratio to its baseline. The p99 row carries the target when
    ``target_p99_ms`` is given (issue 8, section 4); ``ratio_targets`` maps a sample key to
    the largest ratio allowed (e.g. ``{"cpu": 2.0}``; the target reads "<= 2x bare").
    """
    p99 = Stat.of(values["p99"], "ms")
    key, label = memory

    def row(measurement: str, sample_key: str, unit: str, **extra: Any) -> Row:
        ratio = paired_ratio(values[sample_key], bases[sample_key]) if any(bases[sample_key]) else None
        limit = (ratio_targets or {}).get(sample_key)
        if limit is not None and ratio is not None:
            extra = {**extra, "target": f"<= {limit:g}x bare", "holds": ratio.median <= limit}
        return Row(
            section,
            f"{name}: {measurement}",
            value=Stat.of(values[sample_key], unit),
            baseline_name=baseline_name,
            baseline=Stat.of(bases[sample_key], unit),
            ratio=ratio,
            **extra,
        )

    target: dict[str, Any] = {}
    if target_p99_ms is not None:
        target = {"target": f"p99 < {target_p99_ms:.0f} ms", "holds": p99.median < target_p99_ms}
    return [
        row("delay p50", "p50", "ms"),
        row("delay p99", "p99", "ms", **target),
        row(cpu, "cpu", "s", note=cpu_note),
        row(label, key, "KiB"),
    ]


def _fmt(value: float, unit: str) -> str:
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "runs":
        return f"{value:.0f} runs"
    if unit == "%":
        return f"{value:.0f}%"
    if abs(value) >= 10_000:
        return f"{value:,.0f} {unit}"
    if abs(value) >= 100:
        return f"{value:.0f} {unit}"
    if abs(value) >= 1:
        return f"{value:.2f} {unit}"
    return f"{value:.3f} {unit}"


def _fmt_range(stat: Stat) -> str:
    return f"{_fmt(stat.min, stat.unit)} .. {_fmt(stat.max, stat.unit)}"


def format_table(rows: Sequence[Row]) -> str:
    """Return a plain-text table of ``rows`` (one line per row, notes indented below)."""
    header = ("section", "measurement", "median", "min .. max", "baseline (median)", "ratio", "target", "holds")
    lines: list[tuple[str, ...]] = [header]
    notes: dict[int, str] = {}
    for row in rows:
        if not row.available:
            status = "skipped" if row.note.startswith("skipped: ") else "not available"
            lines.append((row.section, row.name, status, "", "", "", row.target, ""))
            notes[len(lines) - 1] = row.note
            continue
        value = _fmt(row.value.median, row.value.unit) if row.value else ""
        spread = _fmt_range(row.value) if row.value else ""
        base = f"{row.baseline_name}: {_fmt(row.baseline.median, row.baseline.unit)}" if row.baseline else ""
        ratio = _fmt(row.ratio.median, row.ratio.unit) if row.ratio else ""
        holds = "" if row.holds is None else ("yes" if row.holds else "NO")
        lines.append((row.section, row.name, value, spread, base, ratio, row.target, holds))
        if row.note:
            notes[len(lines) - 1] = row.note
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for index, line in enumerate(lines):
        out.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip())
        if index == 0:
            out.append("  ".join("-" * w for w in widths))
        if index in notes:
            out.append(f"    ({notes[index]})")
    return "\n".join(out)


def machine(load_at_start: Sequence[float] | None = None) -> dict[str, Any]:
    """Describe the machine: cores, memory, Python, SQLite, platform and load averages.

    ``load_at_start``: :func:`os.getloadavg` as the run started (read by the caller before
    the run; the load now is ``load_avg_at_end``).
    """
    import sqlite3

    memory_kb = 0
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    memory_kb = int(line.split()[1])
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(memory_kb / 1024 / 1024, 1),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "load_avg_at_start": list(load_at_start) if load_at_start is not None else None,
        "load_avg_at_end": list(os.getloadavg()),
    }


def write_json(path: str, rows: Sequence[Row], config: dict[str, Any], started_at: float, info: dict[str, Any]) -> None:
    """Write the run's rows, its configuration and the machine description ``info`` (:func:`machine`) to ``path``."""
    data = {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started_at)),
        "duration_seconds": round(time.time() - started_at, 1),
        "machine": info,
        "config": config,
        "rows": [row.to_json() for row in rows],
    }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as handle:
        json.dump(data, handle, indent=2)
        handle.write("\n")


def count_deltas(sample: Any, tokens: str, now: float, seen: set[str] | None) -> int:
    """Record the delivery delay of each emission timestamp in ``tokens`` received at ``now``; return how many counted.

    ``tokens``: a delta's text, emission times (``time.perf_counter()`` seconds) separated by
    spaces; each adds ``(emitted, delay ms)`` to ``sample.delays`` and one to ``sample.deltas``.
    ``seen``: the timestamps this response delivered already (one delivered again is dropped
    and counted in ``sample.duplicates``); None counts every one.
    """
    counted = 0
    for token in tokens.split():
        if seen is not None:
            if token in seen:
                sample.duplicates += 1
                continue
            seen.add(token)
        emitted = float(token)
        sample.delays.append((emitted, (now - emitted) * 1000))
        sample.deltas += 1
        counted += 1
    return counted
