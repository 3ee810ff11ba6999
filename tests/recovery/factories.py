"""Build runs in every recovery-relevant state with the real store and the real stream manager.

A "process" here is what the runtime does, step by step: the run-start commit, the stream
claim, chunks appended as the run, step commits, tool execution records. Tests then stop
doing anything (as a killed process would) and let the lease expire.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync
from django.utils import timezone

from helix_django import store
from helix_django.models import Run, ToolExecution
from helix_django.protocol import RUN_KEY
from helix_django.streams import get_stream_manager

USER_TEXT = "SECRET-PROMPT please explain leases"


def user_message(mid: str = "u1", text: str = USER_TEXT) -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}], "metadata": {}}


def text_chunks(text: str, *, part_id: str = "t1", attempt: str = "a1", pieces: int = 4) -> list[dict[str, Any]]:
    size = max(1, len(text) // pieces)
    deltas = [text[i : i + size] for i in range(0, len(text), size)]
    chunks = [{"type": "start-step", "_attempt": attempt}, {"type": "text-start", "id": part_id, "_attempt": attempt}]
    chunks += [{"type": "text-delta", "id": part_id, "delta": d, "_attempt": attempt} for d in deltas]
    return chunks


class InFlight:
    """A run left in flight by a 'process' that stopped; helpers to advance it first."""

    def __init__(self, session_id: str, *, owner=None, provider: str = "scripted", operation_id: str = "") -> None:
        store.get_or_create_session(session_id, owner_id=getattr(owner, "pk", None))
        manager = get_stream_manager()
        head = async_to_sync(manager.get_info)(session_id)
        result = store.start_run(
            store.RunStartRequest(
                session_id=session_id,
                input_messages=[user_message(f"u-{session_id}")],
                stream_sequence=head.head_sequence if head else 0,
                provider=provider,
                model="scripted-1",
                turn_message_id=f"u-{session_id}",
                lease_owner="proc-dead",
                lease_seconds=30,
                supersede_live=True,
            )
        )
        self.run_id = result.run.id
        self.session_id = session_id
        self.sequence = result.run.start_sequence
        async_to_sync(manager.claim_stream)(session_id, self.run_id, epoch=result.checkpoint.id)
        self.write([{"type": "start", "messageId": result.run.response_message_id}, {"type": "helix-run-start"}])
        store.update_run(self.run_id, status="streaming", provider_operation_id=operation_id)

    @property
    def run(self) -> Run:
        return Run.objects.get(pk=self.run_id)

    def write(self, chunks: list[dict[str, Any]]) -> None:
        marked = [{**c, RUN_KEY: self.run_id} for c in chunks]
        seqs = async_to_sync(get_stream_manager().append)(self.session_id, self.run_id, marked)
        self.sequence = seqs[-1]

    def stream_text(self, text: str, **kwargs: Any) -> None:
        self.write(text_chunks(text, **kwargs))

    def commit_step(self, message: dict[str, Any], step: int = 1) -> None:
        store.commit_step(self.run_id, response_message=message, stream_sequence=self.sequence, step_count=step)

    def tool(
        self, call_id: str, name: str, *, effect: str, status: str, result: Any = None, key: str = ""
    ) -> ToolExecution:
        store.update_run(self.run_id, status="tooling")
        return ToolExecution.objects.create(
            run_id=self.run_id,
            tool_call_id=call_id,
            name=name,
            arguments={"title": "SECRET-ARG"},
            effect=effect,
            status=status,
            result=result,
            idempotency_key=key,
            started_at=timezone.now(),
        )

    def expire(self) -> None:
        """The process is gone: its lease ran out."""
        Run.objects.filter(pk=self.run_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def durable_agents(*, follow: bool = False, **options: Any) -> dict[str, Any]:
    """Return a ``HELIX`` override whose default agent uses the scripted provider in durable mode.

    Without ``follow`` the relaunch scan does not wait for an operation still running
    (``OPERATION_WAIT_SECONDS`` 0): it ends the run ``interrupted``, which Check status then reconciles.
    """
    return {
        "FLUSH_INTERVAL_MS": 5,
        "OPERATION_WAIT_SECONDS": 0 if not follow else 300,
        "AGENTS": {
            "default": {
                "PROVIDER": {
                    "BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider",
                    "OPTIONS": {"DURABLE": True, **options},
                },
                "MODEL": "scripted-1",
            }
        },
    }


def start_operation(options: dict[str, Any], question: str = "explain leases") -> str:
    """Start a durable scripted operation (as a process would), take its id, then stop reading."""
    from helix_django.runtime.providers.base import OperationStarted, ProviderRequest
    from helix_django.runtime.providers.scripted import ScriptedProvider

    async def first_event() -> str:
        stream = ScriptedProvider({"DURABLE": True, **options}).stream(
            ProviderRequest(model="scripted-1", system="", messages=[{"role": "user", "content": question}])
        )
        event = await stream.__anext__()
        await stream.aclose()
        assert isinstance(event, OperationStarted)
        return event.operation_id

    return async_to_sync(first_event)()
