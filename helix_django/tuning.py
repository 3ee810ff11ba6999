"""Process tuning for a server that streams many generations at once: the collector's thresholds.

With hundreds of live streams, one process holds thousands of short-lived objects at any
moment: each stream's pending delta and batch, the group commit's requests and futures,
every reader's wake-up and decoded chunks. CPython's first collector threshold (700
net allocations of tracked objects on Python 3.10-3.12) is below that working set, so a young collection
runs every few milliseconds, finds those objects alive and promotes them. The promoted
objects then trigger full collections, which walk every object the application has
loaded (Django, DRF, the provider SDK: about 100 000 objects, 25-45 ms per collection on
the bench machine) and pause every stream while they run. A first threshold above the
working set lets those objects die young.

Measured with ``python -m bench`` (docs/performance-history.md): 500 runs x 50
tok/s on the database manager with SQLite, p99 94-126 ms with CPython's thresholds and
68-76 ms with the raised one, in three full runs. Counted with ``gc.callbacks`` in one
such measurement: about 300 young and 2-3 full collections in 4 s with CPython's
thresholds, 2-3 young and no full one with the raised one.

Opt-in, because it changes the whole process: call :func:`tune_gc_for_streaming` once in
``asgi.py`` (``example_project/asgi.py`` does).
"""

from __future__ import annotations

import gc

#: The collector's first threshold for a streaming server (CPython's default: 700 on
#: Python 3.10-3.12, 2 000 on 3.13).
STREAMING_GC_THRESHOLD0 = 10_000


def tune_gc_for_streaming() -> tuple[int, int, int]:
    """Raise the collector's first threshold to :data:`STREAMING_GC_THRESHOLD0`; return the previous thresholds.

    The other thresholds stay as the process has them (their meaning differs between
    Python versions), and a first threshold already higher is kept. Returns the
    ``(threshold0, threshold1, threshold2)`` that were in force, so a caller can restore
    them with ``gc.set_threshold(*previous)``. Raises nothing. The collector stays
    enabled and cyclic garbage is still freed.
    """
    previous = gc.get_threshold()
    gc.set_threshold(max(previous[0], STREAMING_GC_THRESHOLD0), *previous[1:])
    return previous
