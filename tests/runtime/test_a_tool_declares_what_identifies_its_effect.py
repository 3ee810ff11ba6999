"""A tool's ``effect_key`` names what identifies its effect; calls of one turn with the same effect share one key."""

from __future__ import annotations

import pytest

from helix_django.runtime.tools import ToolContext, tool


def ctx(turn: str = "u_1") -> ToolContext:
    return ToolContext(run_id="run_1", session_id="s_1", tool_call_id="call_1", turn_message_id=turn)


@tool(effect="side_effect", effect_key=("to", "subject"))
def send(to: str, subject: str, body: str) -> dict:
    """Send an email."""
    return {}


@tool(effect="side_effect", effect_key=lambda args: args["order"].lower())
def charge(order: str, note: str = "") -> dict:
    """Charge an order."""
    return {}


@tool(effect="side_effect")
def post(text: str) -> dict:
    """Post a text."""
    return {}


def test_argument_names_identify_the_effect_within_a_turn():
    first = send.key_for({"to": "ada@example.com", "subject": "Invoice", "body": "Hi Ada"}, ctx())
    reworded = send.key_for({"to": "ada@example.com", "subject": "Invoice", "body": "Hello Ada!"}, ctx())
    other = send.key_for({"to": "bob@example.com", "subject": "Invoice", "body": "Hi Ada"}, ctx())
    next_turn = send.key_for({"to": "ada@example.com", "subject": "Invoice", "body": "Hi Ada"}, ctx("u_2"))
    assert first == reworded and first.startswith("send:")
    assert len({first, other, next_turn}) == 3


def test_a_callable_identifies_the_effect():
    assert charge.key_for({"order": "O-1"}, ctx()) == charge.key_for({"order": "o-1", "note": "again"}, ctx())


def test_the_default_effect_is_every_argument():
    assert post.key_for({"text": "a"}, ctx()) != post.key_for({"text": "b"}, ctx())


def test_an_effect_key_naming_an_unknown_argument_is_refused():
    with pytest.raises(ValueError, match="unknown arguments"):

        @tool(effect="side_effect", effect_key=("recipient",))
        def mail(to: str) -> dict:
            """Mail."""
            return {}


@tool(effect="side_effect", effect_key=("to",), needs_approval=True)
def approved_send(to: str, body: str) -> dict:
    """Send after a person's approval."""
    raise AssertionError("a completed effect never runs again")


@pytest.mark.django_db(transaction=True)
def test_a_call_needing_approval_whose_effect_succeeded_is_answered_without_asking():
    from asgiref.sync import async_to_sync

    from helix_django.models import ToolExecution
    from helix_django.runtime.tool_calls import REPLAYED, execute_call
    from tests.recovery.factories import InFlight

    flight = InFlight("s-approved-once")
    call = ToolContext(flight.run_id, "s-approved-once", "call_2", turn_message_id="u-s-approved-once")
    key = approved_send.key_for({"to": "ada@example.com", "body": "Hi"}, call)
    flight.tool("call_1", "approved_send", effect="side_effect", status="succeeded", result={"sent": 1}, key=key)

    outcome = async_to_sync(execute_call)(approved_send, {"to": "ada@example.com", "body": "Hello again"}, call)
    assert (outcome.kind, outcome.output) == ("output", {"sent": 1})
    record = ToolExecution.objects.get(run_id=flight.run_id, tool_call_id="call_2")
    assert (record.status, record.error_code) == ("succeeded", REPLAYED)
