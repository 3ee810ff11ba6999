"""The chat body's schema check: fastjsonschema accepts or refuses, jsonschema names the field.

Both read the same schema (draft 7); they must agree on every body, or a body one of
them refuses would pass (or an accepted one be refused) depending on the path taken.
"""

from __future__ import annotations

import json

import fastjsonschema
import jsonschema
import pytest

from helix_django.errors import ValidationError
from helix_django.transport import chat_request
from helix_django.transport.chat_request import BODY_SCHEMA, parse_body


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


def test_the_fast_check_and_jsonschema_agree_on_every_body():
    fast = fastjsonschema.compile(BODY_SCHEMA)
    explain = jsonschema.Draft7Validator(BODY_SCHEMA)
    for body in VALID:
        fast(body)
        assert explain.is_valid(body), body
    for body, _field in INVALID:
        with pytest.raises(fastjsonschema.JsonSchemaException):
            fast(body)
        assert not explain.is_valid(body), body


@pytest.mark.parametrize(("body", "field"), INVALID, ids=[field for _body, field in INVALID])
def test_a_refused_body_names_its_field_never_its_value(body, field):
    with pytest.raises(ValidationError) as excinfo:
        parse_body(json.dumps(body).encode())
    refusal = excinfo.value.to_body()
    assert (refusal["cause"], refusal["field"]) == ("body", field)
    assert "robot" not in json.dumps(refusal) and "resume" not in json.dumps(refusal)


def test_a_valid_body_is_not_explained(monkeypatch):
    class Unused:
        def iter_errors(self, body):
            raise AssertionError("jsonschema ran for a valid body")

    monkeypatch.setattr(chat_request, "_EXPLAIN", Unused())
    for body in VALID:
        messages, _trigger, _message_id, _chat_id = parse_body(json.dumps(body).encode())
        assert messages
