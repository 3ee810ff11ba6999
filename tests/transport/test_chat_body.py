"""The chat body's check: plain loops accept or refuse as the schema does, and the first failure names the field.

The schema is plain draft 7: jsonschema must agree with the check on every body
(another implementation reading the published schema decides the same). Refusing never
walks the body a second time (issue 20: the jsonschema explanation of a 50 000-part body
took 7.75 s on the event loop), and cheap structural limits come before any per-part work.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from helix_django.errors import ValidationError
from helix_django.transport import chat_body
from helix_django.transport.chat_body import BODY_SCHEMA, parse_body


def message(role="user", parts=None, **extra):
    return {"id": "m1", "role": role, "parts": [{"type": "text", "text": "hi"}] if parts is None else parts, **extra}


TOOL_PART = {"type": "tool-pick", "toolCallId": "c1", "state": "output-available", "input": {}, "output": 1}
VALID = [
    {"id": "s1", "messages": [message()], "trigger": "submit-message"},
    {"messages": [message(), message("assistant", [{"type": "step-start"}, TOOL_PART]), message()]},
    {"messages": [message(metadata=None)], "messageId": None},
    {
        "messages": [message("assistant", [{"type": "dynamic-tool", "toolCallId": "c2"}])],
        "trigger": "regenerate-message",
    },
    {"message": message(parts=[{"type": "reasoning", "text": "hm"}, {"type": "file", "url": 5}])},
    {"messages": [message(parts=[{"type": "tool-pick", "toolCallId": "c1"}, {"type": "data-x", "data": [1]}])]},
]
INVALID = [
    ([1, 2], "body"),
    ({"messages": "nope"}, "messages"),
    ({"messages": [message("robot")]}, "messages.0.role"),
    ({"messages": [message(parts=[{"type": "text"}])]}, "messages.0.parts.0"),
    ({"messages": [message(parts=[{"type": "text", "text": {"a": 1}}])]}, "messages.0.parts.0.text"),
    ({"messages": [message(parts=[{"type": "tool-pick"}])]}, "messages.0.parts.0"),
    ({"messages": [message(parts=[{"type": "dynamic-tool", "toolCallId": ""}])]}, "messages.0.parts.0.toolCallId"),
    ({"messages": [message(parts=[{"text": "no type"}])]}, "messages.0.parts.0"),
    ({"messages": [message(metadata=[])]}, "messages.0.metadata"),
    ({"messages": [message()], "trigger": "resume"}, "trigger"),
    ({"messages": [message()], "messageId": 7}, "messageId"),
    ({"id": "", "messages": [message()]}, "id"),
    ({"messages": [{"id": "m1", "role": "user"}]}, "messages.0"),
    ({f"junk{i}": i for i in range(40)}, "body"),
]


TYPES = ["text", "reasoning", "tool-x", "tool-", "dynamic-tool", "dynamic-tools", "xtool-a", "data-x", "", "t" * 101, 5]
VALUES = [None, "", "ok", "x" * 129, 3, {"a": 1}]


def part_bodies():
    """Every part of a type from TYPES with ``text``/``toolCallId`` absent or from VALUES, and non-object parts."""
    parts = [1, "text", [], None, {}]
    for kind in TYPES:
        parts.append({"type": kind})
        parts.extend({"type": kind, field: value} for field in ("text", "toolCallId") for value in VALUES)
    return [{"messages": [message(parts=[{"type": "step-start"}, part])]} for part in parts]


def accepted(body):
    try:
        parse_body(json.dumps(body).encode())
    except ValidationError:
        return False
    return True


ODD = [None, True, 0, 1.5, "", "x" * 129, "ok", [], {}, ["user"], {"a": 1}]


def envelope_bodies():
    """Bodies whose envelope fields (body, message) take each of ODD, a known value, or are absent."""
    bodies = [None, 5, "s", [], {}, {"messages": []}, {"message": None}, {"messages": [None]}]
    for key in ("id", "messages", "message", "trigger", "messageId"):
        bodies.extend({"messages": [message()], key: value} for value in ODD)
    for key in ("id", "role", "parts", "metadata"):
        bodies.extend({"messages": [{**message(), key: value}]} for value in ODD)
        bodies.append({"messages": [{k: v for k, v in message().items() if k != key}]})
        bodies.extend({"message": {**message(), key: value}} for value in ODD)
    bodies.append({"messages": [{**message(), **{f"k{i}": i for i in range(14)}}]})  # 17 properties
    bodies.append({"messages": [{**message(), **{f"k{i}": i for i in range(13)}}]})  # 16
    bodies.append({"messages": [message()], **{f"k{i}": i for i in range(31)}})  # 32
    bodies.append({"messages": [message(role=role) for role in ("user", "assistant", "system")]})
    bodies.append({"messages": [message()], "trigger": "regenerate-message", "messageId": "m1"})
    return bodies


def test_the_body_check_and_jsonschema_agree_on_every_body():
    explain = jsonschema.Draft7Validator(BODY_SCHEMA)
    for body in VALID:
        assert explain.is_valid(body) and accepted(body), body
    for body, _field in INVALID:
        assert not explain.is_valid(body) and not accepted(body), body
    bodies = part_bodies()
    assert 40 < sum(map(accepted, bodies)) < len(bodies) - 40
    for body in bodies:
        assert accepted(body) == explain.is_valid(body), body["messages"][0]["parts"][1]
    envelopes = envelope_bodies()
    assert 15 < sum(map(accepted, envelopes)) < len(envelopes) - 40
    for body in envelopes:
        # A body without any message is refused after the schema (cause "messages"): the schema has no minItems.
        has_message = isinstance(body, dict) and (body.get("messages") or body.get("message") is not None)
        assert accepted(body) == (explain.is_valid(body) and bool(has_message)), body


@pytest.mark.parametrize(("body", "field"), INVALID, ids=[field for _body, field in INVALID])
def test_a_refused_body_names_its_field_never_its_value(body, field):
    with pytest.raises(ValidationError) as excinfo:
        parse_body(json.dumps(body).encode())
    refusal = excinfo.value.to_body()
    assert (refusal["cause"], refusal["field"]) == ("body", field)
    assert "robot" not in json.dumps(refusal) and "resume" not in json.dumps(refusal)


def test_no_body_is_explained_by_a_second_walk(monkeypatch):
    def walk(*args, **kwargs):
        raise AssertionError("jsonschema walked the body")

    monkeypatch.setattr(jsonschema.Draft7Validator, "iter_errors", walk)
    for body in VALID:
        messages, _trigger, _message_id, _chat_id = parse_body(json.dumps(body).encode())
        assert messages
    for body, field in INVALID:
        with pytest.raises(ValidationError) as excinfo:
            parse_body(json.dumps(body).encode())
        assert excinfo.value.to_body()["field"] == field


def many_parts(count):
    return [{"type": "text", "text": "x"} for _ in range(count)]


@pytest.mark.parametrize(
    ("body", "field", "limit"),
    [
        ({"messages": [message(parts=many_parts(50_000))]}, "messages.0.parts", 2_000),
        ({"message": message(parts=many_parts(2_001))}, "message.parts", 2_000),
        ({"messages": [message(parts=many_parts(2_000)) for _ in range(11)]}, "messages", 20_000),
    ],
    ids=["one-message", "bare-message", "all-messages"],
)
def test_too_many_parts_are_refused_before_any_part_is_validated(monkeypatch, body, field, limit):
    def schema(body):
        raise AssertionError("the schema walked an oversized body")

    monkeypatch.setattr(chat_body, "_check_envelope", schema)
    with pytest.raises(ValidationError) as excinfo:
        parse_body(json.dumps(body).encode())
    assert excinfo.value.to_body() == {
        "error": "Too many message parts",
        "code": "validation_error",
        "retryable": False,
        "cause": "body",
        "field": field,
        "limitParts": limit,
    }


def test_too_many_messages_are_refused_by_their_count(monkeypatch):
    monkeypatch.setattr(chat_body, "_check_envelope", None)
    with pytest.raises(ValidationError) as excinfo:
        parse_body(json.dumps({"messages": [0] * 10_001}).encode())
    assert (excinfo.value.cause, excinfo.value.extra) == ("body", {"field": "messages", "limitMessages": 10_000})


def test_the_total_parts_limit_is_a_setting(settings):
    settings.HELIX = {"MAX_REQUEST_PARTS": 3}
    body = {"messages": [message(parts=many_parts(2)), message(parts=many_parts(2))]}
    with pytest.raises(ValidationError) as excinfo:
        parse_body(json.dumps(body).encode())
    assert excinfo.value.extra == {"field": "messages", "limitParts": 3}
    settings.HELIX = {"MAX_REQUEST_PARTS": 4}
    assert len(parse_body(json.dumps(body).encode())[0]) == 2
