"""The scripted provider: rules, steps, pace, failure points, durable operations across processes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time

import pytest
from django.test import override_settings

from helix_django.errors import ProviderError
from helix_django.models import Run
from helix_django.runtime.providers.base import (
    Finish,
    OperationStarted,
    Progress,
    ProviderRequest,
    ReasoningDelta,
    TextDelta,
    ToolCall,
)
from helix_django.runtime.providers.scripted import ScriptedProvider, default_reply, tokenize
from tests.runtime.conftest import agent, rows, text, user_message


def request(question: str, *history: dict, attempt: int = 1) -> ProviderRequest:
    messages = [{"role": "user", "content": question}, *history]
    return ProviderRequest(
        model="m", system="", messages=messages, attempt_id="att_x", options={"attempt_number": attempt}
    )


async def events_of(provider: ScriptedProvider, req: ProviderRequest) -> list:
    return [event async for event in provider.stream(req)]


def test_tokenize_joins_back_exactly():
    sample = "  Hello,  world!\n\nNew paragraph. "
    assert "".join(tokenize(sample)) == sample
    assert len(tokenize("one two three")) == 3


async def test_default_reply_names_the_question_and_streams_in_tokens():
    events = await events_of(ScriptedProvider(), request("How do leases work?"))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert "".join(deltas) == default_reply("How do leases work?")
    assert "How do leases work?" in "".join(deltas[:8])
    assert default_reply("x").count("\n\n") == 4  # a readable multi-paragraph answer
    assert events[-1] == Finish("stop", {"inputTokens": 10, "outputTokens": len(deltas)})


async def test_rules_match_the_users_text_and_steps_follow_tool_rounds():
    provider = ScriptedProvider(
        {
            "TEXT": "fallback",
            "RULES": [
                {
                    "MATCH": r"\bweather\b",
                    "STEPS": [{"TOOL_CALLS": [{"name": "lookup", "arguments": {"city": "Oslo"}}]}, {"TEXT": "Sunny."}],
                },
                {"MATCH": "think", "REASONING": "Let me think. ", "TEXT": "Thought."},
            ],
        }
    )
    first = await events_of(provider, request("What's the weather?"))
    assert [type(e) for e in first] == [ToolCall, Finish]
    assert (
        first[0].name == "lookup"
        and json.loads(first[0].arguments) == {"city": "Oslo"}
        and first[1].reason == "tool-calls"
    )
    after_tool = request(
        "What's the weather?",
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "name": "lookup", "arguments": "{}"}]},
        {"role": "tool", "tool_call_id": "c", "content": "{}"},
    )
    assert "".join(e.text for e in await events_of(provider, after_tool) if isinstance(e, TextDelta)) == "Sunny."
    thinking = await events_of(provider, request("please THINK"))
    assert "".join(e.text for e in thinking if isinstance(e, ReasoningDelta)) == "Let me think. "
    assert "".join(e.text for e in thinking if isinstance(e, TextDelta)) == "Thought."
    other = await events_of(provider, request("hello"))
    assert "".join(e.text for e in other if isinstance(e, TextDelta)) == "fallback"


async def test_pace_is_tokens_per_second():
    provider = ScriptedProvider({"TEXT": "a b c d e f g h i j", "PACE_TPS": 50})
    started = time.monotonic()
    await events_of(provider, request("q"))
    assert 0.18 <= time.monotonic() - started < 2.0  # 10 tokens at 50/s


async def test_failure_points():
    text_ = "one two three four five six seven eight nine ten"
    failing = ScriptedProvider({"TEXT": text_, "FAIL_AFTER_CHUNKS": 3, "FAIL_RETRYABLE": True})
    seen = []
    with pytest.raises(ProviderError) as caught:
        async for event in failing.stream(request("q")):
            seen.append(event)
    assert caught.value.is_retryable and caught.value.cause == "scripted_failure"
    assert len(seen) == 3
    # FAIL_ATTEMPTS: only the first attempt fails.
    assert isinstance(
        (
            await events_of(
                ScriptedProvider({"TEXT": text_, "FAIL_AFTER_CHUNKS": 3, "FAIL_ATTEMPTS": 1}), request("q", attempt=2)
            )
        )[-1],
        Finish,
    )
    dropped = await events_of(ScriptedProvider({"TEXT": text_, "DROP_AFTER_CHUNKS": 4}), request("q"))
    assert len(dropped) == 4 and not any(isinstance(e, Finish) for e in dropped)
    hanging = ScriptedProvider({"TEXT": text_, "HANG_AFTER_CHUNKS": 2})
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(events_of(hanging, request("q")), 0.3)


@pytest.mark.django_db(transaction=True)
async def test_durable_operation_retrieve_cancel_and_stream_from():
    provider = ScriptedProvider({"TEXT": "alpha beta gamma", "DURABLE": True})
    assert provider.capabilities() == frozenset({"retrieve", "cancel", "stream_from"})
    assert ScriptedProvider().capabilities() == frozenset()
    events = await events_of(provider, request("q"))
    assert isinstance(events[0], OperationStarted)
    operation = events[0].operation_id
    result = await ScriptedProvider({"DURABLE": True}).retrieve(operation)  # another instance, same cache
    assert (result.status, result.text, result.finish_reason) == ("completed", "alpha beta gamma", "stop")
    tail = [e async for e in provider.stream_from(operation, 1) if not isinstance(e, Progress)]
    assert [e.text for e in tail if isinstance(e, TextDelta)] == ["beta ", "gamma"]
    assert await provider.cancel(operation) == "already_finished"
    assert (await provider.retrieve("scrop_missing")).status == "unknown"

    slow = ScriptedProvider({"TEXT": "x " * 50, "DURABLE": True, "PACE_TPS": 5, "DROP_AFTER_CHUNKS": 1})
    events = await events_of(slow, request("q"))
    operation = events[0].operation_id
    assert (await slow.retrieve(operation)).status == "in_progress"
    assert await slow.cancel(operation) == "cancelled"
    assert (await slow.retrieve(operation)).status == "cancelled"


@pytest.mark.django_db(transaction=True)
async def test_a_later_process_completes_a_durable_operation(tmp_path):
    """The operation outlives the process that started it: another interpreter retrieves it."""
    caches = {"default": {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache", "LOCATION": str(tmp_path)}}
    with override_settings(CACHES=caches):
        provider = ScriptedProvider({"TEXT": "durable answer", "DURABLE": True, "DROP_AFTER_CHUNKS": 1})
        events = await events_of(provider, request("q"))
    operation = events[0].operation_id
    script = textwrap.dedent(
        f"""
        import asyncio, django
        from django.conf import settings
        settings.configure(CACHES={caches!r}, INSTALLED_APPS=[])
        django.setup()
        from helix_django.runtime.providers.scripted import ScriptedProvider
        result = asyncio.run(ScriptedProvider({{"DURABLE": True}}).retrieve({operation!r}))
        print(result.status, "|", result.text)
        """
    )
    output = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert output.stdout.strip() == "completed | durable answer"


@pytest.mark.django_db(transaction=True)
async def test_a_dropped_durable_operation_is_completed_by_the_run(executor, session, use_agents):
    use_agents(default=agent({"TEXT": "one two three four five", "DURABLE": True, "DROP_AFTER_CHUNKS": 2}))
    handle = await executor.execute(session, [user_message("q")])
    assert await executor.wait(handle.run_id, 20) == "completed"
    run = await Run.objects.aget(pk=handle.run_id)
    assert run.provider_operation_id.startswith("scrop_")
    assert text((await rows(session.id))[1]) == "one two three four five"


def test_a_continue_call_goes_on_where_the_partial_answer_stopped():
    from helix_django.runtime.context import CONTINUE_INSTRUCTION

    full = default_reply("What is a checkpoint?")
    partial = full[:123]
    messages = [
        {"role": "user", "content": "What is a checkpoint?"},
        {"role": "assistant", "content": partial},
        {"role": "user", "content": CONTINUE_INSTRUCTION},
    ]
    req = ProviderRequest(model="m", system="", messages=messages, attempt_id="att_x", options={})
    assert ScriptedProvider({}).plan(req)["TEXT"] == full[123:]
    # A configured text that does not start with the partial answer is left as it is.
    assert ScriptedProvider({"TEXT": "Something else."}).plan(req)["TEXT"] == "Something else."


def test_a_question_that_ends_its_sentence_gets_no_second_full_stop():
    assert default_reply("How do leases work?").startswith("You asked: \u201cHow do leases work?\u201d\n\n")
    assert default_reply("Tell me about leases.").startswith("You asked: \u201cTell me about leases.\u201d\n\n")
    assert default_reply("leases").startswith("You asked: \u201cleases\u201d.\n\n")
