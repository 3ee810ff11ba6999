"""Tools used by the runtime tests, with call counters (the side effects the tests look at)."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

from helix_django.runtime.providers.scripted import ScriptedProvider
from helix_django.runtime.tools import ToolContext, client_tool, tool

calls: Counter[str] = Counter()
"""How many times each tool body actually ran."""
gates: dict[str, threading.Event] = {}
"""Events a hanging tool sets when it started (``started:<name>``); runs execute on another thread."""


ledger: dict[str, Any] = {}
"""What ``charge_card_reconciled``'s reconcile answers per idempotency key: a Reconciled, None, "raise" or "hang"."""


def reset() -> None:
    calls.clear()
    gates.clear()
    ledger.clear()


@tool(effect="read_only")
def lookup(city: str) -> dict:
    """Look up the weather of a city."""
    calls["lookup"] += 1
    return {"city": city, "forecast": "sunny", "celsius": 21}


@tool(effect="side_effect")
def create_ticket(title: str, priority: int = 1) -> dict:
    """Create a support ticket (a side effect)."""
    calls["create_ticket"] += 1
    return {"ticket": f"T-{calls['create_ticket']}", "title": title, "priority": priority}


@tool(effect="side_effect", idempotency_key=lambda args, ctx: f"charge:{args['order']}")
async def charge_card(order: str, ctx: ToolContext) -> dict:
    """Charge an order; hangs after starting when the order is 'hang'."""
    calls["charge_card"] += 1
    assert ctx.run_id and ctx.tool_call_id
    if order == "hang":
        gates.setdefault("started:charge_card", threading.Event()).set()
        await asyncio.Event().wait()
    return {"charged": order}


async def ask_the_ledger(execution: Any) -> Any:
    """``reconcile`` of ``charge_card_reconciled``: the payment provider's answer, looked up by idempotency key."""
    calls["reconcile"] += 1
    answer = ledger.get(execution.idempotency_key)
    if answer == "raise":
        raise RuntimeError("the payment provider is down")
    if answer == "hang":
        await asyncio.Event().wait()
    return answer


@tool(
    effect="side_effect",
    idempotency_key=lambda args, ctx: f"recharge:{args['order']}",
    reconcile=ask_the_ledger,
)
async def charge_card_reconciled(order: str) -> dict:
    """Charge an order; its first call hangs after starting (the process dies there)."""
    calls["charge_card_reconciled"] += 1
    if calls["charge_card_reconciled"] == 1:
        gates.setdefault("started:charge_card_reconciled", threading.Event()).set()
        await asyncio.Event().wait()
    return {"charged": order, "attempt": calls["charge_card_reconciled"]}


@tool(effect="side_effect", authorize=lambda args, ctx: args["title"] != "forbidden")
def guarded_ticket(title: str) -> dict:
    """Create a ticket, unless the caller is not allowed to."""
    calls["guarded_ticket"] += 1
    return {"title": title}


@tool(effect="side_effect", needs_approval=True)
def delete_file(path: str) -> dict:
    """Delete a file (needs a person's approval)."""
    calls["delete_file"] += 1
    return {"deleted": path}


@tool(effect="read_only")
def explode() -> dict:
    """A tool that raises."""
    calls["explode"] += 1
    raise RuntimeError("secret tool internals")


@tool(effect="read_only")
def blob(size: int) -> str:
    """Return a text of ``size`` characters (a tool result of any size)."""
    calls["blob"] += 1
    return "x" * size


pick_color = client_tool(
    "pick_color",
    description="Ask the user to pick a color in the browser.",
    schema={"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]},
)

PATH = "tests.runtime.toolbox"


class RecordingProvider(ScriptedProvider):
    """The scripted provider, recording the model context of every call."""

    requests: list = []

    async def stream(self, request):
        RecordingProvider.requests.append(request)
        async for event in super().stream(request):
            yield event
