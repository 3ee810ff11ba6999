"""A Responses API background generation outlives its server and goes on as the same run, token by token.

Seen: the real ``openai`` SDK in background mode against a paced server, daphne stopped
mid-answer (SIGKILL, or a deploy's SIGTERM) and started again: the run was followed and
completed from the operation's final output in one block (a ``data-stream-resync``), or
ended ``interrupted``; a client resuming from its cursor never got the rest as deltas. The
restarted process's scan re-attaches the run (``responses.retrieve(id, stream=True,
starting_after=N)``): the client gets the rest exactly once, live while the operation still
generates, then ``finish``; same run, same message, one ``POST /v1/responses`` per model
call. An operation that completed asking for a tool while no server was up goes on too:
the tool runs once and the final answer completes the same run.
"""

from __future__ import annotations

import time

import pytest

from helix_django.models import Message, Run, RunStatus, ToolExecution
from helix_django.testing import FakeOpenAI, Reply
from tests.recovery.live_chat import LiveChat, creates, openai_helix, user_token

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

#: 80 deltas 0.15 s apart: the operation runs 12 s, most of it after the restart (a few seconds
#: on a loaded machine), so part of the rest must arrive live.
ANSWER = " ".join(f"token{i}" for i in range(80)) + "."
INTERVAL = 0.15
TOOL = "tests.runtime.toolbox.lookup"


def stop_server(server, how: str) -> None:
    if how == "sigkill":
        server.kill()
    else:  # a deploy: the drain leaves the durable operation to the next process
        assert server.stop(timeout=15) == 0


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        yield server


@pytest.mark.parametrize("stop", ["sigkill", "sigterm"])
def test_a_background_answer_goes_on_live_as_the_same_run_after_a_restart(daphne_server_factory, fake, stop):
    fake.replies.append(Reply(text=ANSWER, interval_seconds=INTERVAL))
    server = daphne_server_factory(asgi_app="tests.recovery.asgi_recovering:application", helix=openai_helix(fake))
    chat = LiveChat(server, user_token())
    chat.send(until=lambda c: sum(1 for _s, k in c.chunks if k.get("type") == "text-delta") >= 10)
    cursor = chat.chunks[-1][0]
    stop_server(server, stop)
    run = chat.run()
    operation, message_id = run.provider_operation_id, run.response_message_id
    assert run.status == RunStatus.STREAMING and operation
    record = fake.responses[operation]

    restarted = time.monotonic()
    server.start()
    rest = chat.resume_through(cursor, seconds=40)
    chunks = [c for _t, _s, c in rest]
    deltas = [(t, c["delta"]) for t, _s, c in rest if c.get("type") == "text-delta"]
    assert chunks[-1]["type"] == "finish"
    assert not any(c.get("type") in ("data-stream-resync", "error") for c in chunks)
    assert chat.text + "".join(d for _t, d in deltas) == ANSWER  # the rest exactly once
    operation_done = fake.due_at(record, len(record["events"]) - 1)
    live = [t for t, _d in deltas if t < operation_done]
    assert len(live) >= 3, "the rest came as one block after the operation ended, not live"
    seconds = deltas[0][0] - restarted
    print(f"{stop}: first re-attached delta {seconds:.2f}s after the restart, {len(live)} of {len(deltas)} live")
    assert seconds < 10

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, (run.status, run.error_detail())
    assert Run.objects.filter(session_id=chat.session_id).count() == 1
    assert run.provider_operation_id == operation and run.response_message_id == message_id
    answer = Message.objects.get(session_id=chat.session_id, position=1)
    assert answer.ui_id == message_id and answer.text == ANSWER and answer.metadata["helix"]["partial"] is False
    assert creates(fake) == 1  # one generation: no second POST /v1/responses
    assert all(fake.status_of(r) != "in_progress" for r in fake.responses.values())
    final = next(iter(fake.responses.values()))["final"]["usage"]  # the re-attached operation's own report
    assert (run.usage["source"], run.usage["inputTokens"]) == ("reported", final["input_tokens"])
    assert (run.usage["outputTokens"], run.usage["estimatedTokens"]) == (final["output_tokens"], 0)


def test_an_operation_that_asked_for_a_tool_while_no_server_was_up_goes_on_with_the_tool_once(
    daphne_server_factory, fake
):
    call = {"id": "call_weather", "name": "lookup", "arguments": {"city": "Oslo"}}
    fake.replies += [
        Reply(text="Let me look that up for you now.", tool_calls=[call], interval_seconds=INTERVAL),
        Reply(text="It is sunny in Oslo."),
    ]
    server = daphne_server_factory(
        asgi_app="tests.recovery.asgi_recovering:application", helix=openai_helix(fake, tools=[TOOL])
    )
    chat = LiveChat(server, user_token())
    chat.send(until=lambda c: sum(1 for _s, k in c.chunks if k.get("type") == "text-delta") >= 2)
    cursor = chat.chunks[-1][0]
    server.kill()
    run = chat.run()
    record = fake.responses[run.provider_operation_id]
    while fake.status_of(record) == "in_progress":  # the operation completes while no server is up
        time.sleep(0.1)

    server.start()
    rest = chat.resume_through(cursor, seconds=40)
    chunks = [c for _t, _s, c in rest]
    assert chunks[-1]["type"] == "finish"
    assert not any(c.get("type") in ("data-stream-resync", "error") for c in chunks)
    outputs = [c for c in chunks if c.get("type") == "tool-output-available"]
    assert [c["toolCallId"] for c in outputs] == ["call_weather"]
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, (run.status, run.error_detail())
    assert Run.objects.filter(session_id=chat.session_id).count() == 1
    assert ToolExecution.objects.filter(run=run).count() == 1  # the tool ran once
    answer = Message.objects.get(session_id=chat.session_id, position=1)
    assert answer.text.startswith("Let me look that up for you now.") and answer.text.endswith("It is sunny in Oslo.")
    assert creates(fake) == 2  # the operation and the model call after the tool's result
    assert all(fake.status_of(r) != "in_progress" for r in fake.responses.values())
