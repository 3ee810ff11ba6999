"""What each recovery action is called and what its confirmation page says will happen."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from helix_django.recovery import inventory as inv

TITLES = {
    inv.CHECK_STATUS: _("Check status"),
    inv.MARK_INTERRUPTED: _("Mark interrupted"),
    inv.CANCEL: _("Cancel"),
    inv.REGENERATE: _("Regenerate"),
    inv.CONTINUE: _("Continue"),
    inv.KEEP_PARTIAL: _("Keep partial"),
    inv.DISCARD_PARTIAL: _("Discard partial"),
}

EFFECTS = {
    inv.CHECK_STATUS: _(
        "Ask the provider what happened to this generation's operation (by its operation id). The status "
        "query is retried at most three times. If the operation finished, the generation is completed with "
        "the provider's final output; otherwise it stays interrupted. No new inference starts and no tool runs."
    ),
    inv.MARK_INTERRUPTED: _(
        "End this generation as interrupted. Its partial output is kept and shown as partial, its stream "
        "ends with a retryable 'interrupted' error, and tools that started without a recorded result are "
        "marked 'unknown'. Nothing is restarted or re-run."
    ),
    inv.CANCEL: _(
        "End this generation as cancelled and ask the provider to stop its operation where the provider "
        "supports that. The partial output is kept as partial. A cancelled generation is never resumed "
        "automatically."
    ),
    inv.REGENERATE: _(
        "Start a NEW attempt at this turn from the last safe checkpoint: the model runs again and the answer "
        "may differ. The interrupted attempt stays in the history. Side-effecting tool calls of this turn that "
        "already succeeded open the new attempt with their recorded results, and a call with the same effect "
        "is answered from its record: no completed side effect is run again by this action."
    ),
    inv.CONTINUE: _(
        "Start a NEW generation that continues from the partial output (or the provider's continuation "
        "state). This is new inference shown as a new generation, not a resume of the original stream."
    ),
    inv.KEEP_PARTIAL: _(
        "Keep the partial text in the conversation as a partial assistant message, as it is. No inference."
    ),
    inv.DISCARD_PARTIAL: _(
        "Remove the partial assistant message from the conversation. It stays archived for audit. No inference."
    ),
}
