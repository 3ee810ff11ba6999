"""The provider of a run, and bounded status queries of its durable operation.

000, "Recovery should have bounded automation": a transient failure of a status query is
retried (a few times, with short delays); nothing else is retried automatically.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

from helix_django import store
from helix_django.conf import helix_settings, import_from_setting
from helix_django.deadlines import within
from helix_django.errors import HelixError
from helix_django.models import Run

logger = logging.getLogger(__name__)

#: Seconds to wait before the 2nd and 3rd status query (three queries at most).
STATUS_RETRY_DELAYS_SECONDS = (0.2, 0.5)
#: Seconds one status query may take.
STATUS_QUERY_TIMEOUT_SECONDS = 10.0
#: Seconds the read of an ended operation's usage may take (one query: a Stop waits for it).
USAGE_QUERY_TIMEOUT_SECONDS = 3.0


@dataclasses.dataclass(frozen=True)
class StatusQuery:
    """The outcome of querying a run's provider operation."""

    result: Any | None
    """The provider's ``OperationResult`` (``status``: in_progress, completed, failed, cancelled, unknown) or None."""
    attempts: int
    """Queries made (0 when the provider cannot be queried)."""
    reason: str
    """``ok``, ``no_operation``, ``not_supported`` or ``status_unavailable`` (every query failed)."""


def provider_for(run: Run) -> Any | None:
    """Return a provider instance configured for ``run``'s agent, or None when it cannot be built.

    Reads ``HELIX["AGENTS"][run.agent]["PROVIDER"]``; never raises for configuration
    problems (the relaunch scan then treats the operation as not queryable).
    """
    agent = (helix_settings.AGENTS or {}).get(run.agent) or (helix_settings.AGENTS or {}).get(
        helix_settings.DEFAULT_AGENT
    )
    if agent is None:
        agent = {}  # no such agent: the KeyError below reports it
    try:
        config = agent["PROVIDER"]
        backend = import_from_setting(config["BACKEND"], f"HELIX['AGENTS'][{run.agent!r}]['PROVIDER']['BACKEND']")
        return backend(config.get("OPTIONS", {}))
    except (KeyError, TypeError, ImportError):
        logger.warning("helix recovery: provider of agent %s cannot be loaded", run.agent)
        return None


async def aended_operation_usage(provider: Any, operation_id: str) -> dict[str, int]:
    """Return the token usage the provider reports for its ended operation ``operation_id``; {} when it cannot tell.

    One retrieve (``supports_retrieve``), bounded by :data:`USAGE_QUERY_TIMEOUT_SECONDS`; an
    operation still ``in_progress`` reports nothing (its usage is not final). Shape: the
    provider's ``OperationResult.usage`` (``inputTokens``, ``outputTokens``, ...). Never raises
    for a provider failure (seed 000, "Cancel and stop are not the same": a cancelled operation
    is reconciled with what the provider says of it).
    """
    if not operation_id or provider is None or not getattr(provider, "supports_retrieve", False):
        return {}
    try:
        result = await within(provider.retrieve(operation_id), USAGE_QUERY_TIMEOUT_SECONDS)
    except Exception as exc:  # noqa: BLE001 - no report: the estimate stands
        logger.info("helix: usage of operation %s not read (%s)", operation_id, type(exc).__name__)
        return {}
    if getattr(result, "status", "") == "in_progress":
        return {}
    return dict(getattr(result, "usage", None) or {})


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, HelixError):
        return exc.is_retryable
    return isinstance(exc, (OSError, asyncio.TimeoutError, ConnectionError))


async def aquery_operation(run: Run, provider: Any | None = None) -> StatusQuery:
    """Ask the provider for the state of ``run.provider_operation_id``, retrying transient failures.

    At most ``1 + len(STATUS_RETRY_DELAYS_SECONDS)`` queries. Never raises for a provider
    failure: it is reported as ``reason="status_unavailable"``.
    """
    if not run.provider_operation_id:
        return StatusQuery(None, 0, "no_operation")
    provider = provider if provider is not None else provider_for(run)
    if provider is None or not getattr(provider, "supports_retrieve", False):
        return StatusQuery(None, 0, "not_supported")
    delays = (0.0, *STATUS_RETRY_DELAYS_SECONDS)
    for attempt, delay in enumerate(delays, start=1):
        if delay:
            await asyncio.sleep(delay)
        try:
            result = await within(provider.retrieve(run.provider_operation_id), STATUS_QUERY_TIMEOUT_SECONDS)
        except Exception as exc:  # noqa: BLE001 - classified below, never logged with its text
            if not _is_transient(exc):
                logger.warning("helix recovery: status query of run %s failed (%s)", run.id, type(exc).__name__)
                return StatusQuery(None, attempt, "status_unavailable")
            continue
        return StatusQuery(result, attempt, "ok")
    return StatusQuery(None, len(delays), "status_unavailable")


async def acancel_operation(run: Run) -> str:
    """Cancel ``run``'s provider operation where it may still be generating; record and return the answer.

    For a run given up while its durable operation may go on (000, "Cancel and stop are not
    the same"): nothing is left generating unseen, and no redo runs beside it. Returns the
    provider's answer (``cancelled``, ``already_finished``, ``unknown``; ``failed`` when the
    call failed, which is recorded too) or ``""`` when there is nothing to cancel: no
    operation, one already answered (``provider_cancel_result`` set) or a provider that
    cannot cancel. The call is bounded by :data:`STATUS_QUERY_TIMEOUT_SECONDS`; raises nothing.
    """
    if not run.provider_operation_id or run.provider_cancel_result:
        return ""
    provider = provider_for(run)
    if provider is None or not getattr(provider, "supports_cancel", False):
        return ""
    try:
        answer = str(await within(provider.cancel(run.provider_operation_id), STATUS_QUERY_TIMEOUT_SECONDS))[:64]
    except Exception as exc:  # noqa: BLE001 - the outcome is uncertain: recorded as such
        logger.warning("run %s: cancelling its provider operation failed (%s)", run.id, type(exc).__name__)
        answer = "failed"
    await store.arecord_recovery(run.id, provider_cancel_result=answer)
    return answer
