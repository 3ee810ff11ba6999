"""A durable operation's usage is read from the provider when the run's process could not see its end.

The real ``openai`` SDK, Responses API in background mode, against a paced
:class:`~helix_django.testing.FakeOpenAI` (40 deltas 0.1 s apart; 7 input tokens; a cancelled
response reports the output deltas due before its cancel):

- a Stop cancels the operation mid-answer: the run's usage is what the provider reports of
  the cancelled operation (``reported``, its input tokens counted), not the 4-characters
  estimate, whether the Stop reaches the process executing the run or another one;
- a run whose process died mid-answer is completed by the relaunch scan from the operation's
  final response: its usage is that response's (``reported``), not an estimate of the text.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from helix_django.models import Run
from helix_django.recovery.scan import arecover
from helix_django.testing import FakeOpenAI, Reply
from tests.runtime.conftest import user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

ANSWER = " ".join(f"token{i}" for i in range(40)) + "."
INTERVAL = 0.1


def openai_agent(server: FakeOpenAI) -> dict:
    options = {"BASE_URL": server.base_url, "API_KEY": "test-key", "API": "responses", "BACKGROUND": True}
    return {
        "PROVIDER": {"BACKEND": "helix_django.runtime.providers.openai.OpenAIProvider", "OPTIONS": options},
        "MODEL": "gpt-test",
    }


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


async def wait_for_text(run_id: str, chars: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if await Run.objects.filter(pk=run_id).exclude(provider_operation_id="").aexists():
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(chars * INTERVAL / 8)  # about ``chars`` characters of "tokenN " have streamed


async def test_a_stopped_operations_usage_is_what_the_provider_reports_of_it(executor, session, use_agents, server):
    server.replies.append(Reply(text=ANSWER, interval_seconds=INTERVAL))
    use_agents(default=openai_agent(server))
    handle = await executor.execute(session, [user_message("Count")])
    await wait_for_text(handle.run_id, 80)
    await executor.cancel(session=session, run_id=handle.run_id)
    run = await Run.objects.aget(pk=handle.run_id)
    assert run.status == "cancelled" and run.provider_cancel_result == "cancelled"
    record = next(iter(server.responses.values()))
    reported = record["final"]["usage"]
    assert 0 < reported["output_tokens"] < 40  # cut mid-answer
    assert run.usage["source"] == "reported" and run.usage["estimatedTokens"] == 0
    assert run.usage["inputTokens"] == 7
    assert run.usage["outputTokens"] == reported["output_tokens"]


async def test_a_stop_served_where_the_run_is_not_executing_records_the_providers_report_too(
    executor, session, use_agents, server
):
    server.replies.append(Reply(text=ANSWER, interval_seconds=INTERVAL))
    use_agents(default=openai_agent(server))
    handle = await executor.execute(session, [user_message("Count")])
    await wait_for_text(handle.run_id, 80)
    assert executor.abandon(handle.run_id)  # executing elsewhere as far as this process knows: a detached Stop
    await executor.cancel(session=session, run_id=handle.run_id)
    run = await Run.objects.aget(pk=handle.run_id)
    assert run.status == "cancelled" and run.provider_cancel_result == "cancelled" and run.partial_chars > 0
    reported = next(iter(server.responses.values()))["final"]["usage"]
    assert run.usage["source"] == "reported" and run.usage["estimatedTokens"] == 0
    assert (run.usage["inputTokens"], run.usage["outputTokens"]) == (7, reported["output_tokens"])


async def test_an_operation_the_scan_completes_records_its_final_responses_usage(executor, session, use_agents, server):
    server.replies.append(Reply(text=ANSWER, interval_seconds=INTERVAL))
    use_agents(default={**openai_agent(server), "LEASE_SECONDS": 1})
    handle = await executor.execute(session, [user_message("Count")])
    await wait_for_text(handle.run_id, 40)
    assert executor.abandon(handle.run_id)  # the process dies; the operation goes on at the provider
    await asyncio.sleep(40 * INTERVAL + 0.5)  # the operation completes at the provider
    await Run.objects.filter(pk=handle.run_id).aupdate(lease_expires_at=timezone.now() - timedelta(seconds=5))
    await arecover()
    run = await Run.objects.aget(pk=handle.run_id)
    assert run.status == "completed"
    assert run.usage["source"] == "reported" and run.usage["estimatedTokens"] == 0
    final = next(iter(server.responses.values()))["final"]["usage"]
    assert (run.usage["inputTokens"], run.usage["outputTokens"]) == (7, final["output_tokens"])
