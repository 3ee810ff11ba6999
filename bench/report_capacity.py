"""The capacity rows of results JSONs as one Markdown table: ``python -m bench.report_capacity A.json [B.json]``.

One line per route, server and process count: the runs held at p99 <= 100 ms, the ratio of
two processes to one (same run), redis-server's and PostgreSQL's CPU per delta where the
row measured them, and the load average (1 min) during the sweep. Several files (e.g. a
full sweep and a later repeat of some rows) give one line each per row, labelled by the
run's start time.
"""

from __future__ import annotations

import json
import re
import sys

ROW = re.compile(r"^(?P<route>.*) via (?P<server>\w+), (?P<n>\d+) process(?:es)?: runs held$")
WHOLE = re.compile(r"^(?P<route>.*) via (?P<server>\w+)$")
"""A row for every process count of a route not swept here (e.g. "skipped: no PostgreSQL")."""
REDIS = re.compile(r"redis-server CPU at \d+: (\d+) us per delta")
POSTGRES = re.compile(r"PostgreSQL CPU at \d+: (\d+) us per delta in the database's backends \+ (\d+) us")
LOAD = re.compile(r"load average ([\d.]+) at the start, ([\d.]+) at the end")


def lines(data: dict) -> list[str]:
    """The table lines of one results JSON's capacity rows."""
    when = data["started_at"][11:16]
    held: dict[tuple[str, str, str], int] = {}
    out = []
    for row in data["rows"]:
        found = ROW.match(row["name"])
        whole = WHOLE.match(row["name"]) if not row["available"] else None
        if row["section"] != "capacity" or not (found or whole):
            continue
        if whole:
            out.append(f"| {when} | {whole['route']} | {whole['server']} | | {row['note']} | | | | |")
            continue
        route, server, n = found["route"], found["server"], found["n"]
        if not row["available"]:
            out.append(f"| {when} | {route} | {server} | {n} | {row['note']} | | | | |")
            continue
        count = int(row["value"]["median"])
        held[route, server, n] = count
        one = held.get((route, server, "1")) if n == "2" else None
        ratio = f"{count / one:.2f}x" if one else ""
        redis = REDIS.search(row["note"])
        postgres = POSTGRES.search(row["note"])
        load = LOAD.search(row["note"])
        out.append(
            f"| {when} | {route} | {server} | {n} | {count} | {ratio} | "
            f"{redis[1] + ' us' if redis else ''} | "
            f"{postgres[1] + ' + ' + postgres[2] + ' us' if postgres else ''} | "
            f"{load[1] + ' -> ' + load[2] if load else ''} |"
        )
    return out


def markdown(runs: list[dict]) -> str:
    """The Markdown table of the capacity rows of ``runs`` (results JSONs)."""
    head = [
        "| run (UTC) | route | server | processes | runs held | 2 / 1 | redis-server CPU per delta | "
        "PostgreSQL CPU per delta (backends + background) | load average (1 min) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    return "\n".join(head + [line for data in runs for line in lines(data)])


if __name__ == "__main__":
    loaded = []
    for path in sys.argv[1:] or ["bench/results.json"]:
        with open(path) as handle:
            loaded.append(json.load(handle))
    print(markdown(loaded))
