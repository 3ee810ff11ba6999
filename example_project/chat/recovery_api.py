"""The chat page's recovery actions for the owner of a session (000, "Recovery actions should reflect certainty").

helix_django's admin offers every recovery action to staff; a person chatting needs the
ones about their own partial answer: Continue, Keep and Discard (Regenerate goes through
the chat route, ``trigger: "regenerate-message"``). These endpoints are mounted under the
same prefix as helix_django's API and use its base view: session ownership (404 for
anyone else), CSRF, throttles and typed error bodies.

- ``GET  sessions/<id>/runs/<run_id>/recovery``: ``{runId, status, recoveryAction,
  actions: {regenerate|continue|keep|discard: {available, reason}}}``;
- ``POST sessions/<id>/runs/<run_id>/continue | keep | discard``: perform it through
  :func:`helix_django.recovery.actions.aperform`; ``{action, runId, outcome, newRunId}``.
  Refused with 409 ``state_run_not_actionable`` (``cause`` = the action) when the
  inventory says it does not apply.
"""

from __future__ import annotations

from asgiref.sync import async_to_sync
from rest_framework.request import Request
from rest_framework.response import Response

from helix_django.api.views import HelixAPIView
from helix_django.errors import RunNotFoundError
from helix_django.models import ChatSession, Run
from helix_django.recovery import inventory as inv
from helix_django.recovery.actions import aperform

#: URL action -> recovery action of helix_django.recovery.inventory.
ACTIONS = {
    "regenerate": inv.REGENERATE,
    "continue": inv.CONTINUE,
    "keep": inv.KEEP_PARTIAL,
    "discard": inv.DISCARD_PARTIAL,
}
#: Actions a session owner may perform here (Regenerate streams through the chat route).
OWNER_ACTIONS = ("continue", "keep", "discard")


def _run_of(session: ChatSession, run_id: str) -> Run:
    run = Run.objects.filter(pk=run_id, session=session).first()
    if run is None:
        raise RunNotFoundError()
    return run


class RunRecoveryView(HelixAPIView):
    """``GET``: which recovery actions apply to the run and why not; what was already done."""

    def get(self, request: Request, session_id: str, run_id: str) -> Response:
        run = _run_of(self.session(session_id), run_id)
        availability = inv.inventory(run)
        actions = {
            name: {"available": availability[action].is_available, "reason": availability[action].reason}
            for name, action in ACTIONS.items()
        }
        return Response(
            {"runId": run.id, "status": run.status, "recoveryAction": run.recovery_action, "actions": actions}
        )


class RunActionView(HelixAPIView):
    """``POST``: Continue, Keep or Discard the run's partial answer."""

    action = ""

    def post(self, request: Request, session_id: str, run_id: str) -> Response:
        run = _run_of(self.session(session_id), run_id)
        actor = request.user.pk if request.user.is_authenticated else None
        result = async_to_sync(aperform)(ACTIONS[self.action], run.id, actor_id=actor)
        return Response(
            {"action": self.action, "runId": result.run_id, "outcome": result.outcome, "newRunId": result.new_run_id}
        )
