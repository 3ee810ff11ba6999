"""The @tool decorator (schemas from type hints, effects, keys), argument validation, model context."""

from __future__ import annotations

from typing import Literal

import pytest

from helix_django.models import ToolExecution
from helix_django.runtime.context import CONTINUE_INSTRUCTION, DENIED_TEXT, to_provider_messages
from helix_django.runtime.tool_calls import parse_arguments
from helix_django.runtime.tools import ToolContext, load_tools, tool
from tests.runtime import toolbox
from tests.runtime.conftest import agent, rows, user_message


def test_schema_is_derived_from_type_hints():
    @tool(effect="idempotent")
    def book(
        room: str,
        nights: int,
        price: float | None = None,
        tags: list[str] | None = None,
        kind: Literal["a", "b"] = "a",
        ctx: ToolContext = None,
    ) -> dict:
        """Book a room.

        More text that is not the description.
        """
        return {}

    assert book.name == "book" and book.description == "Book a room." and book.effect == "idempotent"
    assert book.wants_context and not book.is_client
    assert book.parameters == {
        "type": "object",
        "properties": {
            "room": {"type": "string"},
            "nights": {"type": "integer"},
            "price": {"type": "number"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "kind": {"enum": ["a", "b"]},
        },
        "additionalProperties": False,
        "required": ["room", "nights"],
    }


def test_explicit_schema_and_unknown_effect():
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    search = tool(name="search_docs", description="Search.", schema=schema)(lambda q: q)
    assert (search.name, search.parameters) == ("search_docs", schema)
    with pytest.raises(ValueError):
        tool(effect="dangerous")


def test_arguments_are_parsed_and_validated_with_fixed_error_texts():
    assert parse_arguments(toolbox.lookup, '{"city": "Oslo"}') == ({"city": "Oslo"}, "")
    assert parse_arguments(toolbox.lookup, "{not json") == (None, "The tool arguments are not valid JSON")
    assert parse_arguments(toolbox.lookup, "[1]") == (None, "The tool arguments must be a JSON object")
    assert parse_arguments(toolbox.lookup, '{"city": 3}') == (None, "The tool arguments do not match the tool's schema")
    assert parse_arguments(None, "{}") == (None, "Unknown tool")


def test_idempotency_keys():
    ctx = ToolContext(run_id="r1", session_id="s1", tool_call_id="c1", turn_message_id="u1")
    other_attempt = ToolContext(run_id="r2", session_id="s1", tool_call_id="c9", turn_message_id="u1")
    other_turn = ToolContext(run_id="r3", session_id="s1", tool_call_id="c1", turn_message_id="u2")
    args = {"title": "Printer", "priority": 2}
    key = toolbox.create_ticket.key_for(args, ctx)
    assert key.startswith("create_ticket:")
    assert key == toolbox.create_ticket.key_for(dict(reversed(args.items())), other_attempt)  # same turn, same call
    assert key != toolbox.create_ticket.key_for(args, other_turn)
    assert toolbox.lookup.key_for({"city": "x"}, ctx) == ""  # read-only: no identity needed
    assert toolbox.charge_card.key_for({"order": "o-7"}, ctx) == "charge:o-7"  # the tool's own identity


def test_load_tools_rejects_non_tools():
    assert list(load_tools([f"{toolbox.PATH}.lookup", toolbox.create_ticket])) == ["lookup", "create_ticket"]
    with pytest.raises(TypeError):
        load_tools(["tests.runtime.toolbox.reset"])


def test_model_context_from_ui_messages():
    messages = [
        user_message("first", "u1"),
        {
            "id": "a1",
            "role": "assistant",
            "metadata": {"helix": {"partial": False}},
            "parts": [
                {"type": "step-start"},
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool-lookup",
                    "toolCallId": "c1",
                    "state": "output-available",
                    "input": {"city": "Oslo"},
                    "output": {"t": 20},
                },
                {"type": "tool-delete_file", "toolCallId": "c2", "state": "output-denied", "input": {"path": "/x"}},
                {"type": "step-start"},
                {"type": "text", "text": "Done."},
            ],
        },
        user_message("second", "u2"),
        {
            "id": "a2",
            "role": "assistant",
            "metadata": {"helix": {"partial": True}},
            "parts": [{"type": "text", "text": "The API key sho"}],
        },
        {"id": "s", "role": "system", "parts": [{"type": "text", "text": "ignored"}]},
    ]
    assert to_provider_messages(messages) == [
        {"role": "user", "content": "first"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {"id": "c1", "name": "lookup", "arguments": '{"city": "Oslo"}'},
                {"id": "c2", "name": "delete_file", "arguments": '{"path": "/x"}'},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"t": 20}'},
        {"role": "tool", "tool_call_id": "c2", "content": DENIED_TEXT},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "second"},
    ]
    kept = to_provider_messages(messages, keep_partial_id="a2")
    assert kept[-1] == {"role": "assistant", "content": "The API key sho"}
    assert CONTINUE_INSTRUCTION.startswith("Continue")


@pytest.mark.django_db(transaction=True)
async def test_an_unauthorized_call_is_refused_and_recorded(executor, session, use_agents):
    toolbox.reset()
    steps = [
        {"TOOL_CALLS": [{"id": "c1", "name": "guarded_ticket", "arguments": {"title": "forbidden"}}]},
        {"TEXT": "ok"},
    ]
    use_agents(default=agent({"STEPS": steps}, tools=[f"{toolbox.PATH}.guarded_ticket"]))
    handle = await executor.execute(session, [user_message("do it")])
    assert await executor.wait(handle.run_id, 10) == "completed"
    assert toolbox.calls["guarded_ticket"] == 0
    record = await ToolExecution.objects.aget(run_id=handle.run_id)
    assert (record.status, record.error_code) == ("failed", "denied")
    part = next(p for p in (await rows(session.id))[1]["parts"] if p.get("toolCallId") == "c1")
    assert part["state"] == "output-error" and part["errorText"] == "The tool call was not authorized"
