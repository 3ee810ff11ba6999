"""A durable scripted provider whose status queries wait for a gate (to hold a recovery mid-way)."""

from __future__ import annotations

import asyncio
import threading

from helix_django.runtime.providers.base import OperationResult
from helix_django.runtime.providers.scripted import ScriptedProvider

gate = threading.Event()
"""Set it to let pending :meth:`GatedProvider.retrieve` calls answer."""
entered = threading.Event()
"""Set when a retrieve call is waiting at the gate."""


class GatedProvider(ScriptedProvider):
    """ScriptedProvider (durable) whose ``retrieve`` waits for :data:`gate`."""

    async def retrieve(self, operation_id: str) -> OperationResult:
        entered.set()
        await asyncio.to_thread(gate.wait, 20)
        return await super().retrieve(operation_id)
