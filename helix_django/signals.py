"""Signals sent by helix_django (past tense, STYLE "Conventions").

- ``run_started(sender=Run, run=Run)``: after the run-start commit.
- ``run_finished(sender=Run, run=Run, status=str)``: after a terminal commit.
- ``recovery_action_taken(sender=Run, run=Run, action=str, outcome=str)``: after a recovery action.
"""

from django.dispatch import Signal

run_started = Signal()
run_finished = Signal()
recovery_action_taken = Signal()
