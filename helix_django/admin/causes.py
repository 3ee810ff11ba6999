"""What the admin tells people about a run's ending: the cause in words, and how the run was resolved.

A run that ended ``interrupted`` or ``failed`` keeps a cause code (``Run.error_cause``: the
relaunch scan's reasons, ``recovery/scan.py``, and the runtime's own) beside its error code
(``Run.error_code``). :func:`cause` turns them into a sentence support staff understand, in
the active language, with the code shown beside it (000, "Recovery actions should reflect
certainty": say what is known). :func:`resolution` does the same for ``Run.recovery_action``.
"""

from __future__ import annotations

from typing import Any

from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from helix_django.admin.display import run_link
from helix_django.models import Run

#: Most runs a run's page names as resolved by it.
RESOLVES_SHOWN = 10

#: Words for each cause code a run's ending records (``Run.error_cause``).
CAUSES = {
    "process_lost": gettext_lazy(
        "The server process running it stopped answering (its lease expired), so the answer was cut off."
    ),
    "server_stopped": gettext_lazy("The server was stopped or redeployed while it was answering."),
    "stream_dropped": gettext_lazy("The connection to the model provider dropped in the middle of the answer."),
    "connection": gettext_lazy("The model provider could not be reached."),
    "status_unavailable": gettext_lazy(
        "Its process stopped, and the model provider could not be asked whether the answer finished."
    ),
    "no_operation": gettext_lazy("Its process stopped before the model provider had started an operation."),
    "not_supported": gettext_lazy(
        "Its process stopped, and this model provider cannot be asked what became of the answer."
    ),
    "operation_unknown": gettext_lazy("Its process stopped, and the model provider no longer knows the operation."),
    "provider_requested_tools": gettext_lazy(
        "Its process stopped while the model was asking to run tools; they were not run."
    ),
    "provider_failed": gettext_lazy("The model provider reported that the answer failed."),
    "provider_cancelled": gettext_lazy("The model provider cancelled the answer."),
    "provider_in_progress": gettext_lazy("The model provider was still answering when waiting for it stopped."),
    "response_failed": gettext_lazy("The model provider reported that the answer failed."),
    "scripted_failure": gettext_lazy("The scripted test model failed on purpose."),
    "operation_unavailable": gettext_lazy("The model provider's operation could not be found."),
    "after_run_start": gettext_lazy("An internal error stopped it right after it started."),
    "tool_result": gettext_lazy("A tool result was larger than the limit."),
}

#: Words for each resolution (``Run.recovery_action``) and the two recovery actions that leave the run open.
RESOLUTIONS = {
    "regenerate": gettext_lazy("Regenerated: a new attempt at the turn"),
    "continue": gettext_lazy("Continued: a new generation went on from the partial answer"),
    "keep_partial": gettext_lazy("Partial answer kept"),
    "discard_partial": gettext_lazy("Partial answer discarded"),
    "superseded": gettext_lazy("Superseded by a newer generation"),
    "follow_up": gettext_lazy("Interrupted by a follow-up message"),
    "interrupted_by_follow_up": gettext_lazy("Stopped for a follow-up message sent while it was answering"),
    "check_status": gettext_lazy("Status checked: still needs a decision"),
    "mark_interrupted": gettext_lazy("Marked interrupted: still needs a decision"),
}


def cause(run: Run) -> tuple[str, str]:
    """Return ``(words, code)`` for why ``run`` ended as it did; ``("", "")`` for a run without an error.

    ``words``: the cause code's sentence (:data:`CAUSES`), else the run's stored error text
    in the active language; ``code``: the cause code, else the error code.
    """
    if not run.error_code and not run.error_cause:
        return "", ""
    if run.error_cause in CAUSES:
        return str(CAUSES[run.error_cause]), run.error_cause
    words = _(run.error_message) if run.error_message else _("The generation did not finish.")
    return words, run.error_cause or run.error_code


def resolution(run: Run) -> str:
    """Return how ``run`` was resolved, in words ('' while it has no recorded recovery action)."""
    action = run.recovery_action
    return str(RESOLUTIONS.get(action, action)) if action else ""


def cause_html(run: Run) -> SafeString | str:
    """Return :func:`cause` as HTML, the code in ``<code class="helix-cause-code">``; '' without an error."""
    words, code = cause(run)
    return format_html('{} <code class="helix-cause-code">{}</code>', words, code) if words else ""


def resolution_html(run: Run) -> SafeString | str:
    """Return :func:`resolution` followed by a link to the run that resolved ``run`` (if any); ''."""
    words = resolution(run)
    if not words or not run.resolved_by:
        return words
    return format_html("{} → {}", words, run_link(run.resolved_by))


def page_context(run: Run) -> dict[str, Any]:
    """Return a run page's ``cause_words``, ``cause_code``, ``resolution`` (HTML) and ``resolves``.

    ``resolves``: links to the runs ``run`` resolved (``Run.resolved_by``), at most
    :data:`RESOLVES_SHOWN`; one query.
    """
    words, code = cause(run)
    earlier = Run.objects.filter(resolved_by=run.pk).order_by("created_at").values_list("pk", flat=True)
    return {
        "cause_words": words,
        "cause_code": code,
        "resolution": resolution_html(run),
        "resolves": [run_link(pk) for pk in earlier[:RESOLVES_SHOWN]],
    }
