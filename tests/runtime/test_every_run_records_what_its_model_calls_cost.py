"""Every run records what its model calls cost: reported by the provider, or estimated, and which.

With the scripted provider (each model call reports ``inputTokens`` 10 and one output token
per word it streamed): a completed run sums its calls; a run interrupted after its process
died keeps its committed steps' reported usage and estimates the text of the call it died
in; a stopped run's cut-off call is estimated; a retried attempt's discarded text is
estimated, not lost (helix_django/usage.py).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from django.utils import timezone

from helix_django.models import Run
from helix_django.recovery.scan import arecover
from helix_django.runtime.providers.scripted import tokenize
from helix_django.usage import UsageMeter, estimate_tokens, usage_record
from tests.runtime import toolbox
from tests.runtime.conftest import agent, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

ANSWER = "The weather in Oslo is mild today, with light wind from the west."
LOOKUP = {"TEXT": "Let me look. ", "TOOL_CALLS": [{"id": "call-1", "name": "lookup", "arguments": {"city": "Oslo"}}]}


def words(text: str) -> int:
    return len(tokenize(text))


async def run_of(handle) -> Run:
    return await Run.objects.aget(pk=handle.run_id)


async def test_a_completed_run_sums_every_reported_call(executor, session, use_agents):
    use_agents(default=agent({"STEPS": [LOOKUP, {"TEXT": ANSWER}]}, tools=[f"{toolbox.PATH}.lookup"]))
    handle = await executor.execute(session, [user_message("Weather in Oslo?")])
    assert await executor.wait(handle.run_id, 10) == "completed"
    usage = (await run_of(handle)).usage
    assert usage["inputTokens"] == 20 and usage["outputTokens"] == words("Let me look. ") + words(ANSWER)
    assert (usage["source"], usage["estimatedTokens"]) == ("reported", 0)


async def test_a_run_whose_process_died_keeps_its_steps_usage_and_estimates_the_rest(executor, session, use_agents):
    steps = [LOOKUP, {"TEXT": ANSWER, "HANG_AFTER_CHUNKS": 6}]
    use_agents(default=agent({"STEPS": steps}, tools=[f"{toolbox.PATH}.lookup"]))
    handle = await executor.execute(session, [user_message("Weather in Oslo?")])
    for _ in range(200):
        run = await run_of(handle)
        if run.usage:  # the first step committed its usage
            break
        await asyncio.sleep(0.05)
    assert run.usage["source"] == "reported" and run.usage["inputTokens"] == 10
    await asyncio.sleep(0.3)  # the second call streams its six words, then hangs
    assert executor.abandon(handle.run_id)  # the process dies inside the model call
    await Run.objects.filter(pk=handle.run_id).aupdate(lease_expires_at=timezone.now() - timedelta(seconds=5))
    await arecover()
    run = await run_of(handle)
    assert run.status == "interrupted"
    usage = run.usage
    assert usage["source"] == "partly_estimated" and usage["inputTokens"] == 10
    assert usage["estimatedTokens"] > 0
    assert usage["outputTokens"] == words("Let me look. ") + usage["estimatedTokens"]


async def test_a_stopped_run_estimates_the_call_it_cut(executor, session, use_agents):
    use_agents(default=agent({"TEXT": ANSWER, "HANG_AFTER_CHUNKS": 5}))
    handle = await executor.execute(session, [user_message("Weather?")])
    await asyncio.sleep(0.3)
    await executor.cancel(session=session, run_id=handle.run_id)
    run = await run_of(handle)
    assert run.status == "cancelled" and run.partial_chars > 0
    assert run.usage == {
        "inputTokens": 0,
        "outputTokens": estimate_tokens(run.partial_chars),
        "reasoningTokens": 0,
        "cachedTokens": 0,
        "source": "estimated",
        "estimatedTokens": estimate_tokens(run.partial_chars),
        "countedChars": run.partial_chars,
    }


async def test_a_retried_attempts_discarded_text_is_estimated_not_lost(executor, session, use_agents):
    options = {"TEXT": ANSWER, "FAIL_AFTER_CHUNKS": 4, "FAIL_RETRYABLE": True, "FAIL_ATTEMPTS": 1}
    use_agents(default={**agent(options), "MAX_ATTEMPTS": 2})
    handle = await executor.execute(session, [user_message("Weather?")])
    assert await executor.wait(handle.run_id, 10) == "completed"
    usage = (await run_of(handle)).usage
    assert usage["source"] == "partly_estimated" and usage["inputTokens"] == 10
    assert usage["estimatedTokens"] == estimate_tokens(len("".join(tokenize(ANSWER)[:4])))
    assert usage["outputTokens"] == words(ANSWER) + usage["estimatedTokens"]


def test_the_record_says_which_tokens_were_estimated():
    assert usage_record({}, 0, 0, 0) == {}
    assert usage_record({"inputTokens": 7, "outputTokens": 3}, 0, 12, 12)["source"] == "reported"
    partly = usage_record({"inputTokens": 7, "outputTokens": 3}, 0, 12, 21)
    assert (partly["source"], partly["estimatedTokens"], partly["outputTokens"]) == ("partly_estimated", 3, 6)
    again = UsageMeter.from_record(partly)
    assert again.record(21) == partly  # a run that goes on elsewhere keeps the same record
    assert estimate_tokens(1) == 1 and estimate_tokens(8) == 2 and estimate_tokens(-3) == 0


def test_the_openai_provider_reads_reasoning_and_cached_tokens_of_both_apis():
    from openai.types import CompletionUsage
    from openai.types.responses import ResponseUsage

    from helix_django.runtime.providers.openai import _counts

    chat = CompletionUsage(
        prompt_tokens=30,
        completion_tokens=12,
        total_tokens=42,
        completion_tokens_details={"reasoning_tokens": 5},
        prompt_tokens_details={"cached_tokens": 16},
    )
    assert _counts(chat, "prompt_tokens", "completion_tokens") == {
        "inputTokens": 30,
        "outputTokens": 12,
        "reasoningTokens": 5,
        "cachedTokens": 16,
    }
    responses = ResponseUsage(
        input_tokens=30,
        output_tokens=12,
        total_tokens=42,
        output_tokens_details={"reasoning_tokens": 4},
        input_tokens_details={"cached_tokens": 0, "cache_write_tokens": 0},
    )
    assert _counts(responses, "input_tokens", "output_tokens") == {
        "inputTokens": 30,
        "outputTokens": 12,
        "reasoningTokens": 4,
    }
