"""The OpenAI provider: the real ``openai`` SDK against a local OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from django.conf import settings as django_settings
from django.test import override_settings

from helix_django.models import Run, ToolExecution
from helix_django.runtime.providers.base import ProviderRequest
from helix_django.runtime.providers.openai import OpenAIProvider
from helix_django.snapshot import abuild_snapshot
from helix_django.testing import FakeOpenAI, Reply
from tests.runtime import toolbox
from tests.runtime.conftest import accumulate, agent, rows, run_chunks, stream_chunks, text, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

OPENAI = "helix_django.runtime.providers.openai.OpenAIProvider"
ANSWER = "It is sunny in Oslo today, with a light breeze."


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(autouse=True)
def _reset_tools():
    toolbox.reset()


def openai_agent(server, **options) -> dict:
    return {
        **agent(tools=[f"{toolbox.PATH}.lookup"]),
        "PROVIDER": {"BACKEND": OPENAI, "OPTIONS": {"BASE_URL": server.base_url, "API_KEY": "test-key", **options}},
        "MODEL": "gpt-test",
    }


async def operation_started(run_id: str) -> Run:
    """Return the run once its provider operation id is stored (polls for about 5 s; AssertionError after)."""
    for _ in range(500):
        run = await Run.objects.aget(pk=run_id)
        if run.provider_operation_id:
            return run
        await asyncio.sleep(0.01)
    raise AssertionError("the provider operation id was never stored")


async def test_chat_completions_stream_text_and_a_tool_call_round_trip(executor, session, use_agents, server, request):
    server.replies += [
        Reply(
            text="Let me check.",
            reasoning="Need the weather.",
            tool_calls=[{"id": "call_9", "name": "lookup", "arguments": {"city": "Oslo"}}],
        ),
        Reply(text=ANSWER),
    ]
    use_agents(default=openai_agent(server))
    # Each provider delta stored as its own chunk, to see below that the SDK streamed the reply in pieces.
    no_coalescing = override_settings(HELIX={**django_settings.HELIX, "COALESCE_DELTAS": False})
    no_coalescing.enable()
    request.addfinalizer(no_coalescing.disable)
    handle = await executor.execute(session, [user_message("Weather in Oslo?")])
    assert await executor.wait(handle.run_id, 20) == "completed"

    run = await Run.objects.aget(pk=handle.run_id)
    assert (run.provider, run.model, run.step_count) == ("openai", "gpt-test", 2)
    assert toolbox.calls["lookup"] == 1
    execution = await ToolExecution.objects.aget(run=run)
    assert (execution.tool_call_id, execution.arguments, execution.status) == ("call_9", {"city": "Oslo"}, "succeeded")

    first, second = (r["body"] for r in server.requests)
    assert first["stream"] is True and first["model"] == "gpt-test"
    assert first["messages"] == [
        {"role": "system", "content": "You are a test assistant."},
        {"role": "user", "content": "Weather in Oslo?"},
    ]
    assert first["tools"][0]["function"]["name"] == "lookup"
    assert first["tools"][0]["function"]["parameters"]["properties"] == {"city": {"type": "string"}}
    assert second["messages"][2] == {
        "role": "assistant",
        "content": "Let me check.",
        "tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "lookup", "arguments": '{"city": "Oslo"}'}}
        ],
    }
    assert (
        second["messages"][3]["role"] == "tool" and json.loads(second["messages"][3]["content"])["forecast"] == "sunny"
    )

    reply = (await rows(session.id))[1]
    assert text(reply) == "Let me check." + ANSWER
    assert reply["metadata"]["usage"] == {"inputTokens": 14, "outputTokens": 3 + 10}  # summed over both calls
    assert [p["type"] for p in reply["parts"]] == [
        "step-start",
        "reasoning",
        "text",
        "tool-lookup",
        "step-start",
        "text",
    ]
    chunks = run_chunks(await stream_chunks(session.id), run.id)
    assert sum(c["type"] == "text-delta" for c in chunks) > 5  # streamed, not in one piece
    assert reply == accumulate(chunks, run.response_message_id)


async def test_provider_http_error_fails_typed_and_scrubbed(executor, session, use_agents, server):
    server.replies.append(Reply(status=503))
    use_agents(default=openai_agent(server))
    handle = await executor.execute(session, [user_message("hi")])
    assert await executor.wait(handle.run_id, 20) == "failed"
    run = await Run.objects.aget(pk=handle.run_id)
    assert (run.error_code, run.error_retryable) == ("provider_error", True)
    snapshot = await abuild_snapshot(session.id)
    assert snapshot["errorDetail"]["code"] == "provider_error"
    assert "scripted failure" not in json.dumps(snapshot)


async def test_background_mode_stores_the_operation_id_before_the_first_delta(executor, session, use_agents, server):
    gate = threading.Event()
    server.replies.append(Reply(text=ANSWER, gate=gate))
    use_agents(default=openai_agent(server, API="responses", BACKGROUND=True))
    handle = await executor.execute(session, [user_message("Weather?")])
    try:
        run = await operation_started(handle.run_id)
        assert run.provider_operation_id.startswith("resp_")
        chunks = run_chunks(await stream_chunks(session.id), handle.run_id)
        assert not any(c["type"] == "text-delta" for c in chunks)  # no delta has arrived yet
    finally:
        gate.set()
    assert await executor.wait(handle.run_id, 20) == "completed"
    body = server.requests[0]["body"]
    assert body["background"] is True and body["stream"] is True and body["instructions"] == "You are a test assistant."
    assert text((await rows(session.id))[1]) == ANSWER


@pytest.mark.parametrize("resume", ["stream_from", "retrieve"])
async def test_background_operation_completes_a_run_whose_stream_was_cut(executor, session, use_agents, server, resume):
    server.replies.append(Reply(text=ANSWER, cut_after=6))
    server.is_stream_resume_broken = resume == "retrieve"
    use_agents(default=openai_agent(server, API="responses", BACKGROUND=True))
    handle = await executor.execute(session, [user_message("Weather?")])
    assert await executor.wait(handle.run_id, 20) == "completed"
    run = await Run.objects.aget(pk=handle.run_id)
    assert run.status == "completed" and run.provider_operation_id in server.responses
    paths = [r["path"] for r in server.requests]
    operation = run.provider_operation_id
    resumed = f"/v1/responses/{operation}?starting_after=5&stream=true"
    if resume == "stream_from":
        assert paths == ["/v1/responses", resumed]
    else:
        assert paths[:2] == ["/v1/responses", resumed] and set(paths[2:]) == {f"/v1/responses/{operation}"}
    # The generation itself was requested once: the operation was resumed, never re-sent.
    reply = (await rows(session.id))[1]
    assert text(reply) == ANSWER  # nothing lost, nothing repeated
    assert reply == accumulate(run_chunks(await stream_chunks(session.id), run.id), run.response_message_id)


async def test_cancel_cancels_the_background_operation(executor, session, use_agents, server):
    gate = threading.Event()
    server.replies.append(Reply(text=ANSWER, gate=gate))
    use_agents(default=openai_agent(server, API="responses", BACKGROUND=True))
    handle = await executor.execute(session, [user_message("Weather?")])
    try:
        await operation_started(handle.run_id)
        run = await executor.cancel(session=session, run_id=handle.run_id)
    finally:
        gate.set()
    assert run.status == "cancelled" and run.provider_cancel_result == "cancelled"
    assert server.responses[run.provider_operation_id]["status"] == "cancelled"


async def test_retrieve_reads_a_completed_background_response(server):
    server.replies.append(
        Reply(
            text=ANSWER, reasoning="Think.", tool_calls=[{"id": "c1", "name": "lookup", "arguments": {"city": "Rome"}}]
        )
    )
    provider = OpenAIProvider({"BASE_URL": server.base_url, "API_KEY": "k", "API": "responses", "BACKGROUND": True})
    assert provider.capabilities() == frozenset({"retrieve", "cancel", "stream_from"})
    assert OpenAIProvider({"BASE_URL": server.base_url}).capabilities() == frozenset()
    events = [
        e
        async for e in provider.stream(
            ProviderRequest(model="m", system="", messages=[{"role": "user", "content": "x"}])
        )
    ]
    operation_id = events[0].operation_id
    result = await provider.retrieve(operation_id)
    assert (result.status, result.text, result.reasoning, result.finish_reason) == (
        "completed",
        ANSWER,
        "Think.",
        "tool-calls",
    )
    assert [(c.id, c.name, json.loads(c.arguments)) for c in result.tool_calls] == [("c1", "lookup", {"city": "Rome"})]
    assert (await provider.retrieve("resp_missing")).status == "unknown"
    assert await provider.cancel(operation_id) == "already_finished"
    await provider.aclose()


def test_the_provider_imports_with_an_sdk_that_lacks_newer_responses_types():
    # openai>=1.50 is allowed; types such as ResponseReasoningItem came later (1.66 has none).
    # The provider module must import without them (chat-completions agents never need them).
    import subprocess
    import sys

    code = (
        "import openai.types.responses as types; del types.ResponseReasoningItem, types.ResponseOutputMessage; "
        "import helix_django.runtime.providers.openai as provider; print(provider.OpenAIProvider.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "OpenAIProvider"


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_server_that_reports_usage_is_recorded_and_one_that_does_not_is_estimated(
    executor, session, use_agents, server, api
):
    """Both APIs: reported usage is the run's (``reported``); without any report its text is estimated."""
    use_agents(default=openai_agent(server, API=api))
    server.replies += [Reply(text=ANSWER), Reply(text=ANSWER, reports_usage=False)]
    for source in ("reported", "estimated"):
        handle = await executor.execute(session, [user_message(f"Weather, {source}?")])
        assert await executor.wait(handle.run_id, 10) == "completed"
        usage = (await Run.objects.aget(pk=handle.run_id)).usage
        assert usage["source"] == source
        if source == "reported":
            assert (usage["inputTokens"], usage["outputTokens"], usage["estimatedTokens"]) == (7, 10, 0)
        else:
            assert usage["inputTokens"] == 0 and usage["outputTokens"] == usage["estimatedTokens"] == 12  # 48 chars
