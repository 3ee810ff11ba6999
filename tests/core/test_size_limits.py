"""Size limits (helix_django/limits.py, docs/limits.md): system checks for absurd values, delta splitting, tool results."""

from __future__ import annotations

import pytest
from django.test import override_settings

from helix_django.api.serializers import ToolResultsSerializer
from helix_django.checks import check_settings
from helix_django.errors import PayloadTooLargeError
from helix_django.limits import json_size, max_delta_chars, split_delta
from helix_django.transport.prefix import prefix_chunks


def ids(messages):
    return sorted(m.id for m in messages)


@pytest.mark.parametrize(
    ("helix", "expected"),
    [
        ({}, []),
        ({"MAX_CHUNK_BYTES": 1000}, ["helix_django.E020"]),
        ({"MAX_CHUNK_BYTES": "1MB"}, ["helix_django.E020"]),
        ({"MAX_TOOL_RESULT_BYTES": 0}, ["helix_django.E020"]),
        ({"MAX_REQUEST_PARTS": 5_000_000}, ["helix_django.E020"]),
        ({"MAX_REQUEST_PARTS": True}, ["helix_django.E020"]),
        ({"MAX_REQUEST_BYTES": 2 * 1024**3}, ["helix_django.E020"]),
        ({"MAX_TOOL_RESULT_BYTES": 999_000}, ["helix_django.E021"]),
        ({"MAX_CHUNK_BYTES": 4_000_000}, ["helix_django.W020"]),
        ({"MAX_MESSAGE_BYTES": 1000}, ["helix_django.E020"]),
        ({"MAX_MESSAGE_BYTES": 2 * 1024**3}, ["helix_django.E020"]),
        ({"MAX_SESSION_MESSAGES": 1}, ["helix_django.E020"]),
        ({"MAX_SESSION_MESSAGES": "many"}, ["helix_django.E020"]),
        ({"MAX_SESSION_MESSAGES": 2_000_000}, ["helix_django.E020"]),
        ({"MAX_MESSAGE_BYTES": 256 * 1024, "MAX_TOOL_RESULT_BYTES": 300 * 1024}, ["helix_django.E021"]),
        ({"MAX_MESSAGE_BYTES": 100_000, "MAX_TOOL_RESULT_BYTES": 50_000, "MAX_SESSION_MESSAGES": 2}, []),
        ({"MAX_CHUNK_BYTES": 100_000, "MAX_TOOL_RESULT_BYTES": 50_000, "MAX_REQUEST_PARTS": 10}, []),
    ],
)
def test_absurd_limits_are_reported(helix, expected):
    with override_settings(HELIX=helix):
        messages = check_settings()
    assert ids(messages) == expected
    assert all(m.hint for m in messages)


def test_a_long_delta_splits_into_deltas_under_the_chunk_limit_that_join_back():
    text = ("\U0001f600\x01" + "a" * 50) * 40_000  # emoji and control characters: the worst escaping
    chunk = {"type": "text-delta", "id": "t1", "delta": text, "_step": 1}
    with override_settings(HELIX={"MAX_CHUNK_BYTES": 100_000}):
        pieces = split_delta(chunk, max_delta_chars())
    assert len(pieces) > 20
    assert all(json_size(p) <= 100_000 for p in pieces)
    assert "".join(p["delta"] for p in pieces) == text
    assert all(p.keys() == chunk.keys() and p["id"] == "t1" for p in pieces)
    assert split_delta({"type": "tool-input-delta", "inputTextDelta": text}, 10) == [
        {"type": "tool-input-delta", "inputTextDelta": text}
    ]


def test_the_replayed_prefix_of_a_long_text_stays_under_the_chunk_limit():
    message = {"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": "w" * 300_000}]}
    with override_settings(HELIX={"MAX_CHUNK_BYTES": 100_000}):
        chunks = prefix_chunks(message, "a1")
    assert max(json_size(c) for c in chunks) <= 100_000
    assert "".join(c.get("delta", "") for c in chunks) == "w" * 300_000


def test_a_client_tool_output_over_the_limit_is_payload_too_large():
    body = {"results": [{"toolCallId": "c1", "output": 1}, {"toolCallId": "c2", "output": {"t": "x" * 600_000}}]}
    with pytest.raises(PayloadTooLargeError) as excinfo:
        ToolResultsSerializer(data=body).is_valid()
    assert excinfo.value.to_body() == {
        "error": "Tool result too large",
        "code": "validation_payload_too_large",
        "retryable": False,
        "cause": "tool_result",
        "limitBytes": 512 * 1024,
        "sizeBytes": 600_008,
    }
