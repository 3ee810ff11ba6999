"""Signals sent by helix_django (past tense, STYLE "Conventions").

- ``run_started(sender=Run, run=Run, rewrote_history=bool)``: after the run-start commit;
  ``rewrote_history`` is true when that commit truncated or replaced committed rows (an
  edit, a regenerate, a continuation), false when it only appended.
- ``run_finished(sender=Run, run=Run, status=str, usage=dict)``: after a terminal commit;
  ``usage`` is the run's token usage as that commit stored it (a copy of ``Run.usage``:
  ``{inputTokens, outputTokens, reasoningTokens, cachedTokens, source, estimatedTokens,
  countedChars}``, :mod:`helix_django.usage`; ``{}`` for a run that never used a model),
  whatever the ending, the relaunch scan's and the recovery actions' endings included.
- ``recovery_action_taken(sender=Run, run=Run, action=str, outcome=str)``: after a recovery action.
- ``tool_executed(sender=ToolExecution, run_id=str, tool_call_id=str, name=str, status=str)``: after a
  server tool ran and its outcome was persisted, before the result goes back to the model.

The runtime sends them with ``Signal.asend``: a coroutine receiver is awaited on the run's
event loop; a plain function runs on the ORM's thread (``sync_to_async``), where it may
query the database. ``run_finished``'s ``run`` is the Run as its terminal commit left it.
"""

from django.dispatch import Signal

run_started = Signal()
run_finished = Signal()
recovery_action_taken = Signal()
tool_executed = Signal()
