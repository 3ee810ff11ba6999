"""An agent loop that passed its token budget ends before its next model call, failed, its partial kept.

The scripted model's first call asks for a tool (its usage, 10 input tokens and a few output
tokens, is committed with the step); with a user budget of 12 tokens the loop is refused
before its second call: the run ends ``failed`` with ``budget_exceeded``, the first step's
text and tool result kept in the partial answer, and the model is called once.
"""

from __future__ import annotations

import pytest

from helix_django.models import Message, Run
from helix_django.runtime.providers.scripted import ScriptedProvider
from tests.runtime import toolbox
from tests.runtime.conftest import agent, helix, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

STEPS = [
    {"TEXT": "Let me look. ", "TOOL_CALLS": [{"id": "call-1", "name": "lookup", "arguments": {"city": "Oslo"}}]},
    {"TEXT": "It is mild in Oslo."},
]


async def test_the_loop_ends_failed_with_its_first_step_kept(executor, session, settings, monkeypatch):
    calls = []
    original = ScriptedProvider.plan
    monkeypatch.setattr(ScriptedProvider, "plan", lambda self, request: calls.append(1) or original(self, request))
    settings.HELIX = {
        **helix(default=agent({"STEPS": STEPS}, tools=[f"{toolbox.PATH}.lookup"])),
        "BUDGET_CLASSES": ["helix_django.budgets.SiteTokenBudget"],
        "BUDGET_RATES": {"site": "12/day"},
    }
    handle = await executor.execute(session, [user_message("Weather in Oslo?")])
    assert await executor.wait(handle.run_id, 10) == "failed"
    run = await Run.objects.aget(pk=handle.run_id)
    assert (run.error_code, run.usage["inputTokens"]) == ("budget_exceeded", 10)
    assert len(calls) == 1  # never called again
    reply = await Message.objects.aget(session_id=session.id, role="assistant", position__isnull=False)
    assert reply.metadata["helix"]["partial"] is True
    assert "Let me look." in reply.text
    assert any(p.get("type") == "tool-lookup" and p.get("state") == "output-available" for p in reply.parts)
