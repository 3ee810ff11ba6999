"""The run's response message holds every delta applied, whenever it is read (issue 23: bounded work per delta).

:class:`~helix_django.protocol.MessageAccumulator` keeps an open part's deltas as pieces and
joins them when the message is read, instead of copying the part's whole text at each
delta (which made a delta of a long answer cost in proportion to the answer). These tests
pin what a reader sees: mid-stream reads, closed and reopened parts, step ends, snapshots,
and the response budget, which reads the message only when its estimate nears the limit.
The per-delta cost itself is a benchmark row (``python -m bench --runtime``: a long reply's
overhead per delta against a short one's).
"""

from __future__ import annotations

from helix_django.limits import ResponseBudget
from helix_django.protocol import MessageAccumulator


def _acc(*chunks: dict) -> MessageAccumulator:
    acc = MessageAccumulator("msg_1")
    for chunk in chunks:
        acc.apply(chunk)
    return acc


def _texts(acc: MessageAccumulator) -> list[tuple[str, str, str]]:
    return [(p["type"], p.get("text", ""), p.get("state", "")) for p in acc.message["parts"] if "text" in p]


def test_a_read_mid_stream_holds_every_delta_so_far_and_later_deltas_follow_it():
    acc = _acc({"type": "start-step"}, {"type": "text-start", "id": "t1"})
    for word in ("Hel", "lo", ", "):
        acc.apply({"type": "text-delta", "id": "t1", "delta": word})
    assert _texts(acc) == [("text", "Hello, ", "streaming")]
    acc.apply({"type": "text-delta", "id": "t1", "delta": "world"})
    assert acc.parts[1]["text"] == "Hello, world"
    acc.apply({"type": "text-end", "id": "t1"})
    assert _texts(acc) == [("text", "Hello, world", "done")]


def test_interleaved_reasoning_and_text_parts_keep_their_own_deltas():
    acc = _acc(
        {"type": "reasoning-start", "id": "r1"},
        {"type": "text-start", "id": "t1"},
        {"type": "reasoning-delta", "id": "r1", "delta": "think "},
        {"type": "text-delta", "id": "t1", "delta": "say "},
        {"type": "reasoning-delta", "id": "r1", "delta": "more"},
        {"type": "text-delta", "id": "t1", "delta": "it"},
        {"type": "text-delta", "id": "unknown", "delta": "dropped"},
    )
    assert _texts(acc) == [("reasoning", "think more", "streaming"), ("text", "say it", "streaming")]
    assert acc.open_parts() == [("reasoning", "r1"), ("text", "t1")]


def test_a_part_reopened_under_the_same_id_leaves_the_first_its_text():
    acc = _acc(
        {"type": "text-start", "id": "t1"},
        {"type": "text-delta", "id": "t1", "delta": "first"},
        {"type": "text-start", "id": "t1"},
        {"type": "text-delta", "id": "t1", "delta": "second"},
    )
    assert [text for _kind, text, _state in _texts(acc)] == ["first", "second"]


def test_a_step_end_and_a_snapshot_close_parts_with_their_whole_text():
    acc = _acc({"type": "text-start", "id": "t1"}, {"type": "text-delta", "id": "t1", "delta": "a"})
    acc.apply({"type": "text-delta", "id": "t1", "delta": "b"})
    snapshot = acc.snapshot()
    assert snapshot["parts"] == [{"type": "text", "text": "ab", "state": "done"}]
    assert _texts(acc) == [("text", "ab", "streaming")]  # the snapshot is a copy: the part stays open
    acc.apply({"type": "text-delta", "id": "t1", "delta": "c"})
    acc.apply({"type": "finish-step"})
    acc.apply({"type": "text-delta", "id": "t1", "delta": "late"})  # after the step: no open part takes it
    assert _texts(acc) == [("text", "abc", "done")]
    assert acc.open_parts() == []


def test_the_budget_reads_the_message_only_when_its_estimate_nears_the_limit(settings):
    settings.HELIX = {**getattr(settings, "HELIX", {}), "MAX_MESSAGE_BYTES": 8192 + 4096}
    acc = _acc({"type": "text-start", "id": "t1"})
    budget = ResponseBudget(acc.message)
    reads = []

    def message():
        reads.append(1)
        return acc.message

    for _ in range(1000):  # 4 000 bytes: well below the 8 192 the answer may hold
        chunk = {"type": "text-delta", "id": "t1", "delta": "abcd"}
        budget.admit(chunk, message)
        acc.apply(chunk)
    assert reads == []
    assert len(acc.parts[0]["text"]) == 4000
