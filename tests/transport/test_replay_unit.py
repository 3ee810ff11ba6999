"""ResponseFilter and the replayed prefix, on synthetic stored chunks (pure functions, no I/O)."""

from __future__ import annotations

import json

from helix_django.protocol import MessageAccumulator
from helix_django.transport.prefix import prefix_chunks
from helix_django.transport.replay import DONE, ERROR, ResponseFilter


def content(seq, kind, attempt, step=1, **fields):
    return seq, {"type": kind, "_run": "run_1", "_attempt": attempt, "_step": step, **fields}


def run_chunks():
    """Step 1: attempt a1 streamed 'old', was superseded by a2 ('new'), a2 committed; then the run ended."""
    return [
        (1, {"type": "helix-run-start", "_run": "run_1", "runId": "run_1"}),
        (2, {"type": "start", "messageId": "m1", "_run": "run_1"}),
        content(3, "start-step", "a1"),
        content(4, "text-start", "a1", id="t1"),
        content(5, "text-delta", "a1", id="t1", delta="old"),
        (
            6,
            {
                "type": "data-attempt-superseded",
                "_run": "run_1",
                "data": {"supersededAttemptId": "a1", "attemptId": "a2"},
            },
        ),
        content(7, "start-step", "a2"),
        content(8, "text-start", "a2", id="t2"),
        content(9, "text-delta", "a2", id="t2", delta="new"),
        content(10, "text-end", "a2", id="t2"),
        content(11, "finish-step", "a2"),
        (12, {"type": "helix-step-committed", "_run": "run_1", "step": 1, "committedAttemptId": "a2"}),
        (13, {"type": "finish", "_run": "run_1"}),
        (14, {"type": "helix-run-end", "status": "completed", "_run": "run_1"}),
    ]


def apply(response_filter, chunks):
    out = []
    for seq, chunk in chunks:
        out.extend(response_filter.accept(seq, chunk))
        if response_filter.terminal:
            break
    return out


def test_full_replay_drops_the_superseded_attempt_and_its_marker():
    chunks = run_chunks()
    response_filter = ResponseFilter(run_id="run_1")
    response_filter.prescan(chunks)
    out = apply(response_filter, chunks)
    assert [c["type"] for c in out] == [
        "start", "start-step", "text-start", "text-delta", "text-end", "finish-step", "finish",
    ]  # fmt: skip
    assert "".join(c.get("delta", "") for c in out) == "new"
    assert not any(k.startswith("_") for c in out for k in c)
    assert response_filter.terminal == DONE


def test_resume_past_superseded_content_keeps_the_marker():
    chunks = run_chunks()
    response_filter = ResponseFilter(run_id="run_1", cursor=5)  # the client saw 'old'
    response_filter.prescan(chunks)
    out = apply(response_filter, [c for c in chunks if c[0] > 5])
    assert out[0]["type"] == "data-attempt-superseded"
    assert "".join(c.get("delta", "") for c in out) == "new"


def test_live_attempt_switch_drops_the_loser_from_then_on():
    response_filter = ResponseFilter(run_id="run_1")
    out = apply(response_filter, run_chunks()[:5])  # a1 live
    assert out[-1]["delta"] == "old"
    late_a1 = content(15, "text-delta", "a1", id="t1", delta="late")
    out = apply(response_filter, [*run_chunks()[5:9], late_a1])
    assert [c["type"] for c in out] == ["data-attempt-superseded", "start-step", "text-start", "text-delta"]


def test_tool_results_for_calls_the_response_does_not_own_become_one_elsewhere_marker():
    response_filter = ResponseFilter(run_id="run_1", tool_names={"call_old": "lookup"})
    chunks = [
        (1, {"type": "start", "messageId": "m2", "_run": "run_1"}),
        (2, {"type": "tool-output-available", "toolCallId": "call_old", "output": 1, "_run": "run_1"}),
        (3, {"type": "tool-output-error", "toolCallId": "call_old", "errorText": "x", "_run": "run_1"}),
        (
            4,
            {
                "type": "tool-input-available",
                "toolCallId": "call_new",
                "toolName": "lookup",
                "input": {},
                "_run": "run_1",
            },
        ),
        (5, {"type": "tool-output-available", "toolCallId": "call_new", "output": 2, "_run": "run_1"}),
    ]
    out = apply(response_filter, chunks)
    assert out[1] == {
        "type": "data-tool-output-elsewhere",
        "id": "run_1:call_old",
        "data": {"reason": "tool_output_elsewhere", "toolCallId": "call_old", "toolName": "lookup", "runId": "run_1"},
    }
    assert [c["type"] for c in out] == [
        "start", "data-tool-output-elsewhere", "tool-input-available", "tool-output-available",
    ]  # fmt: skip
    continued = ResponseFilter(run_id="run_1", owned_tool_call_ids=["call_old"])
    assert apply(continued, chunks[1:2])[0]["type"] == "tool-output-available"


def test_earlier_runs_are_skipped_and_a_superseding_run_is_followed():
    response_filter = ResponseFilter(run_id="run_2")
    chunks = [
        (1, {"type": "text-delta", "id": "t", "delta": "previous turn", "_run": "run_1"}),
        (2, {"type": "helix-run-start", "_run": "run_2"}),
        (3, {"type": "start", "messageId": "m2", "_run": "run_2"}),
        (4, {"type": "helix-run-start", "_run": "run_3"}),
        (5, {"type": "start", "messageId": "m3", "_run": "run_3"}),
        (6, {"type": "helix-run-end", "status": "failed", "_run": "run_3"}),
        (7, {"type": "error", "errorText": "x", "helixError": {"error": "failed", "code": "provider_error"}}),
    ]
    out = apply(response_filter, chunks)
    assert [c.get("messageId") for c in out[:2]] == ["m2", "m3"]
    assert out[-1] == {
        "type": "error",
        "errorText": json.dumps({"error": "failed", "code": "provider_error"}, separators=(",", ":")),
    }
    assert response_filter.terminal == ERROR


def test_tail_start_after_a_prefix_is_not_repeated():
    response_filter = ResponseFilter(run_id="run_1", dedupe_start_for="m1")
    out = apply(
        response_filter, [(2, {"type": "start", "messageId": "m1", "_run": "run_1", "messageMetadata": {"a": 1}})]
    )
    assert out == [{"type": "message-metadata", "messageMetadata": {"a": 1}}]


def test_prefix_rebuilds_the_committed_message():
    message = {
        "id": "m1",
        "role": "assistant",
        "metadata": {"helix": {"runId": "run_1"}},
        "parts": [
            {"type": "step-start"},
            {"type": "reasoning", "id": "r1", "text": "hmm", "state": "done"},
            {"type": "text", "text": "Let me look.", "state": "done"},
            {
                "type": "tool-lookup",
                "toolCallId": "c1",
                "state": "output-available",
                "input": {"city": "Oslo"},
                "output": {"t": 1},
            },
            {"type": "tool-delete_file", "toolCallId": "c2", "state": "output-denied", "input": {"path": "/x"}},
            {"type": "tool-pick_color", "toolCallId": "c3", "state": "input-available", "input": {"prompt": "p"}},
            {
                "type": "tool-lookup",
                "toolCallId": "c4",
                "state": "output-error",
                "input": {"city": "?"},
                "errorText": "no",
            },
            {"type": "data-note", "id": "n1", "data": {"x": 1}},
            {"type": "step-start"},
            {"type": "text", "text": "Done.", "state": "done"},
        ],
    }
    chunks = prefix_chunks(message, "m1")
    assert chunks[0] == {"type": "start", "messageId": "m1", "messageMetadata": {"helix": {"runId": "run_1"}}}
    assert chunks[1]["type"] == chunks[-1]["type"] == "data-helix-replay"
    assert [c["data"]["phase"] for c in (chunks[1], chunks[-1])] == ["begin", "end"]
    acc = MessageAccumulator("")
    for chunk in chunks:
        acc.apply(chunk)
    rebuilt = acc.snapshot()
    assert rebuilt["id"] == "m1" and rebuilt["metadata"] == message["metadata"]
    expected = [dict(p) for p in message["parts"]]
    expected[4]["input"] = {"path": "/x"}
    assert rebuilt["parts"] == expected


def test_prefix_of_an_uncommitted_live_response_is_only_start_and_markers():
    assert [c["type"] for c in prefix_chunks(None, "m9")] == ["start", "data-helix-replay", "data-helix-replay"]
