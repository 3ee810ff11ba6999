"""Print a results JSON as a Markdown table: ``python -m bench.report [bench/results.json]``.

docs/performance.md pastes this output from a full run.
"""

from __future__ import annotations

import json
import sys

from bench.harness import _fmt


def _cell(stat: dict | None) -> str:
    return _fmt(stat["median"], stat["unit"]) if stat else ""


def _range(stat: dict | None) -> str:
    return f"{_fmt(stat['min'], stat['unit'])} .. {_fmt(stat['max'], stat['unit'])}" if stat else ""


def load(machine: dict) -> str:
    """The load averages (1, 5, 15 min) at the run's start and end, as far as the JSON has them."""
    parts = []
    for key, when in (("load_avg_at_start", "start"), ("load_avg_at_end", "end")):
        if machine.get(key):
            parts.append(f"load average at {when} {', '.join(f'{x:.1f}' for x in machine[key])}")
    return "; ".join(parts) or "load average not recorded"


def markdown(data: dict) -> str:
    """Return the machine line and the Markdown table of ``data`` (a results JSON)."""
    machine, config = data["machine"], data["config"]
    lines = [
        f"Run {data['started_at']} ({config['preset']}, {config['sizes']['repeats']} repeats, "
        f"{data['duration_seconds']:.0f} s): {machine['nproc']} cores, {machine['memory_gib']} GiB, "
        f"Python {machine['python']}, SQLite {machine['sqlite']}, {load(machine)}.",
        "",
        "| section | measurement | median | min .. max | baseline (same run, median) | ratio | target | holds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in data["rows"]:
        if not row["available"]:  # the note says "not available: ..." or "skipped: ..."
            lines.append(f"| {row['section']} | {row['name']} | {row['note']} | | | | {row['target']} | |")
            continue
        base = f"{row['baseline_name']}: {_cell(row['baseline'])}" if row["baseline"] else ""
        holds = "" if row["holds"] is None else ("yes" if row["holds"] else "**no**")
        name = row["name"] + (f" ({row['note']})" if row["note"] else "")
        lines.append(
            f"| {row['section']} | {name} | {_cell(row['value'])} | {_range(row['value'])} | {base} | "
            f"{_cell(row['ratio'])} | {row['target']} | {holds} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else "bench/results.json"
    with open(path) as handle:
        print(markdown(json.load(handle)))
