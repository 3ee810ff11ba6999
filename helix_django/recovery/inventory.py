"""The state inventory of a run: stuck runs, tool outcomes, continuation validity, offered actions.

000, "Recovery starts with a state inventory, not an automatic retry" and "Recovery
actions should reflect certainty". :func:`available_actions` says, for each recovery
action, whether it applies to a run and, when not, why (shown to staff as is).
"""

from __future__ import annotations

import dataclasses

from django.utils.translation import gettext as _

from helix_django import store
from helix_django.models import (
    ChatSession,
    Checkpoint,
    CheckpointKind,
    Message,
    Run,
    RunStatus,
    ToolEffect,
    ToolExecution,
    ToolExecutionStatus,
)
from helix_django.models.run import SCANNED_STATUSES
from helix_django.recovery.cancels import is_cancel_unclear
from helix_django.recovery.provider import provider_for
from helix_django.store.leases import is_lease_expired
from helix_django.store.reads import recent_runs

CHECK_STATUS = "check_status"
MARK_INTERRUPTED = "mark_interrupted"
CANCEL = "cancel"
REGENERATE = "regenerate"
CONTINUE = "continue"
KEEP_PARTIAL = "keep_partial"
DISCARD_PARTIAL = "discard_partial"
#: Every recovery action, in the order the admin shows them.
ACTIONS = (CHECK_STATUS, MARK_INTERRUPTED, CANCEL, REGENERATE, CONTINUE, KEEP_PARTIAL, DISCARD_PARTIAL)
#: Terminal statuses whose partial output staff may keep, discard, continue or regenerate.
RECOVERABLE_STATUSES = frozenset({RunStatus.INTERRUPTED, RunStatus.FAILED, RunStatus.CANCELLED})


@dataclasses.dataclass(frozen=True)
class Availability:
    """Whether a recovery action applies to a run; ``reason`` explains a refusal to people."""

    action: str
    is_available: bool
    reason: str = ""


def blocking_tools(executions: list[ToolExecution]) -> list[ToolExecution]:
    """Return side-effecting executions whose outcome is unknown (they block Continue/Regenerate)."""
    return [e for e in executions if e.effect == ToolEffect.SIDE_EFFECT and e.status == ToolExecutionStatus.UNKNOWN]


def history_changed(run: Run) -> bool:
    """Whether the conversation before ``run``'s turn changed after the run started.

    True when a row before the run's response position was rewritten or removed by a
    later checkpoint (an edit of history), so provider continuation state no longer
    matches the visible branch (000, "Editing history invalidates some recovery paths").
    """
    start = Checkpoint.objects.filter(run=run, kind=CheckpointKind.RUN_START).values_list("id", flat=True).first()
    if start is None:
        return False
    rewritten = Message.objects.filter(
        session_id=run.session_id, position__lt=run.start_message_count, checkpoint_id__gt=start
    ).exists()
    truncated = Checkpoint.objects.filter(
        session_id=run.session_id, kind=CheckpointKind.TRUNCATE, id__gt=start, message_count__lt=run.start_message_count
    ).exists()
    return rewritten or truncated


def is_continuation_valid(run: Run) -> bool:
    """Whether ``run``'s partial output / provider continuation state may still be continued."""
    return run.is_continuation_valid and not history_changed(run)


def has_partial_row(run: Run) -> bool:
    """Whether ``run``'s partial response is an active row of the conversation."""
    return Message.objects.filter(
        session_id=run.session_id, position=run.start_message_count, ui_id=run.response_message_id, run=run
    ).exists()


def available_actions(  # noqa: C901 - one flat rule per action reads better than helpers
    run: Run, *, executions: list[ToolExecution], is_current: bool, supports_retrieve: bool
) -> dict[str, Availability]:
    """Return ``{action: Availability}`` for every action in :data:`ACTIONS`.

    ``executions`` are the run's tool executions; ``is_current`` says whether the run is
    still its session's current run; ``supports_retrieve`` whether its provider can be
    asked about an operation. Queries: history and partial-row checks (a few, constant).
    Check status applies to a cancelled run only while the provider's answer to its cancel
    is unclear (:func:`~helix_django.recovery.cancels.is_cancel_unclear`): it asks again;
    never to a run a later run already resolved (``Run.resolved_by``).
    """
    out: dict[str, Availability] = {}

    def put(action: str, reason: str = "") -> None:
        out[action] = Availability(action, not reason, reason)

    status = run.status
    blocked = blocking_tools(executions)
    live = status in SCANNED_STATUSES or status == RunStatus.SUSPENDED_CLIENT_TOOL
    if status == RunStatus.CANCELLED and not is_cancel_unclear(run):
        put(CHECK_STATUS, _("A cancelled generation stays cancelled."))
    elif not run.provider_operation_id:
        put(CHECK_STATUS, _("The provider never returned an operation id for this generation."))
    elif not supports_retrieve:
        put(CHECK_STATUS, _("This provider cannot be asked about an operation's state."))
    elif status in (RunStatus.COMPLETED, RunStatus.SUPERSEDED):
        put(CHECK_STATUS, _("The generation already ended."))
    elif run.resolved_by:
        put(CHECK_STATUS, _("A later run already followed this generation; its operation is no longer asked."))
    elif status in SCANNED_STATUSES and not is_lease_expired(run):
        put(CHECK_STATUS, _("The generation is still running (its process renews its lease)."))
    else:
        put(CHECK_STATUS)
    put(MARK_INTERRUPTED, "" if live else _("Only a running or stuck generation can be marked interrupted."))
    # An ended run is never cancelled: it would tell the user a false "you stopped it" and
    # undo their choice of Keep or Discard.
    put(CANCEL, "" if live else _("The generation already ended: there is nothing left to stop."))
    partial = has_partial_row(run) if status in RECOVERABLE_STATUSES else False
    not_ended = _("The generation has not ended; mark it interrupted or cancel it first.")
    for action in (REGENERATE, CONTINUE):
        if status not in RECOVERABLE_STATUSES:
            put(action, not_ended if live else _("The generation already ended."))
        elif not is_current:
            put(action, _("A later turn exists in this conversation; this generation can no longer be redone."))
        elif blocked:
            names = ", ".join(e.name for e in blocked)
            put(
                action,
                _(
                    "The side-effecting tool %(names)s may already have run: its outcome is unknown. "
                    "Resolve it first (mark executed with its result, or mark not executed), "
                    "so it is neither run twice nor forgotten."
                )
                % {"names": names},
            )
        else:
            put(action)
    if out[CONTINUE].is_available:
        if not is_continuation_valid(run):
            put(CONTINUE, _("The conversation was edited or the provider's continuation state is invalid."))
        elif not partial and not run.continuation:
            put(CONTINUE, _("There is no partial output or continuation state to continue from."))
    for action in (KEEP_PARTIAL, DISCARD_PARTIAL):
        if status not in RECOVERABLE_STATUSES:
            put(action, not_ended if live else _("The generation already ended."))
        elif not partial:
            put(action, _("There is no partial output in the conversation."))
        else:
            put(action)
    if out[KEEP_PARTIAL].is_available and run.recovery_action == KEEP_PARTIAL:
        put(KEEP_PARTIAL, _("The partial output is already kept."))
    if out[DISCARD_PARTIAL].is_available and not is_current:
        put(DISCARD_PARTIAL, _("A later turn exists in this conversation; its rows cannot be removed."))
    return out


def supports_retrieve(run: Run) -> bool:
    """Whether ``run``'s provider declares the ``retrieve`` capability (no network call)."""
    provider = provider_for(run)
    return bool(provider is not None and getattr(provider, "supports_retrieve", False))


def inventory(run: Run) -> dict[str, Availability]:
    """Return :func:`available_actions` for ``run``, reading its tools and session (a few queries)."""
    executions = list(ToolExecution.objects.filter(run=run))
    current = ChatSession.objects.filter(pk=run.session_id, current_run_id=run.id).exists()
    return available_actions(run, executions=executions, is_current=current, supports_retrieve=supports_retrieve(run))


def invalidate_stale_continuations(session_id: str) -> int:
    """Mark ended runs of a session whose earlier history was edited as not continuable; return how many.

    000, "edit before interrupted turn -> invalidate provider continuation after edit point".
    Called when a run starts (an edit truncates or rewrites rows before older turns).
    """
    candidates = recent_runs(session_id, RECOVERABLE_STATUSES, continuable=True, limit=20)
    stale = [run for run in candidates if history_changed(run)]
    for run in stale:
        store.record_recovery(run.id, is_continuation_valid=False)
    return len(stale)
