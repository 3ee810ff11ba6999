"""A session owner's recovery actions on a partial answer (000, "Recovery actions should reflect certainty").

The admin offers every recovery action to staff; the owner of a session needs the ones
about their own run: Regenerate (the safe default), Continue, Keep, Discard, and Check
status (ask the provider about the run's durable operation, with the admin's rules and
bounded automation: :func:`helix_django.recovery.actions.aperform`).
These views derive from :class:`~helix_django.api.base.HelixAPIView`: session ownership
(404 ``state_session_not_found`` for anyone else), CSRF on POST, throttles, typed errors.

- ``GET  sessions/<id>/runs/<run_id>/recovery``: ``{runId, status, recoveryAction,
  actions: {regenerate|continue|keep|discard|check_status: {available, reason}}}``;
- ``POST sessions/<id>/runs/<run_id>/regenerate | continue | keep | discard | check_status``:
  perform it through :func:`helix_django.recovery.actions.aperform`; ``{action, runId,
  outcome, newRunId}``. Refused with 409 ``state_run_not_actionable`` (``cause`` = the
  recovery action, ``error`` = the inventory's reason) when it does not apply, e.g. while
  the run is live or a side-effecting tool's outcome is unknown.

Check status's ``outcome``: ``completed`` (the provider finished: the run completed from its
output); else the run stays or ends interrupted: ``interrupted`` for a stuck run, or the cause
for an interrupted one (``provider_in_progress``, ``provider_failed``, ``status_unavailable``...);
``cancel_<answer>``
on a cancelled run whose provider cancel answer was unclear (asked again; it stays
cancelled), or ``changed_meanwhile``.
"""

from __future__ import annotations

from asgiref.sync import async_to_sync
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from helix_django.access.ownership import is_signed_in
from helix_django.api.base import ERRORS, HelixAPIView, run_of
from helix_django.recovery import inventory as inv
from helix_django.recovery.actions import aperform
from helix_django.runtime.executor import get_executor

#: URL action -> recovery action of :mod:`helix_django.recovery.inventory`, in the order shown.
ACTIONS = {
    "regenerate": inv.REGENERATE,
    "continue": inv.CONTINUE,
    "keep": inv.KEEP_PARTIAL,
    "discard": inv.DISCARD_PARTIAL,
    "check_status": inv.CHECK_STATUS,
}
#: Actions a session owner may POST (each has its route ``runs/<run_id>/<action>``).
OWNER_ACTIONS = tuple(ACTIONS)


class AvailabilitySerializer(serializers.Serializer):
    """``{available, reason}``: whether an action applies; ``reason`` (for people) when not."""

    available = serializers.BooleanField()
    reason = serializers.CharField(allow_blank=True)


#: One :class:`AvailabilitySerializer` per owner action (built from a dict: ``continue`` is a keyword).
RecoveryActionsSerializer = type(
    "RecoveryActionsSerializer",
    (serializers.Serializer,),
    {"__module__": __name__, **{name: AvailabilitySerializer() for name in OWNER_ACTIONS}},
)


class RecoveryInventorySerializer(serializers.Serializer):
    """``GET .../recovery``: ``{runId, status, recoveryAction, actions}``."""

    runId = serializers.CharField()  # noqa: N815 - wire name
    status = serializers.CharField()
    recoveryAction = serializers.CharField(allow_blank=True)  # noqa: N815 - wire name
    actions = RecoveryActionsSerializer()


class RecoveryResultSerializer(serializers.Serializer):
    """``POST .../<action>``: ``{action, runId, outcome, newRunId}`` (``newRunId`` empty unless one started)."""

    action = serializers.ChoiceField(choices=OWNER_ACTIONS)
    runId = serializers.CharField()  # noqa: N815 - wire name
    outcome = serializers.CharField()
    newRunId = serializers.CharField(allow_blank=True)  # noqa: N815 - wire name


@extend_schema(methods=["GET"], responses={200: RecoveryInventorySerializer, **ERRORS})
class RunRecoveryView(HelixAPIView):
    """``GET``: which owner recovery actions apply to the run and why not; what was already done."""

    operation_ids = {"GET": "getRunRecovery"}

    def get(self, request: Request, session_id: str, run_id: str) -> Response:
        run = run_of(self.session(session_id), run_id)
        availability = inv.inventory(run)
        actions = {
            name: {"available": availability[action].is_available, "reason": availability[action].reason}
            for name, action in ACTIONS.items()
        }
        body = {"runId": run.id, "status": run.status, "recoveryAction": run.recovery_action, "actions": actions}
        return Response(RecoveryInventorySerializer(body).data)


@extend_schema(methods=["POST"], request=None, responses={200: RecoveryResultSerializer, **ERRORS})
class RunRecoveryActionView(HelixAPIView):
    """``POST``: Regenerate, Continue, Keep, Discard or Check status of the run (``action`` set by the route)."""

    action = ""
    operation_ids = {"POST": "{action}Run"}
    error_statuses = {"POST": (409,)}

    def post(self, request: Request, session_id: str, run_id: str) -> Response:
        run = run_of(self.session(session_id), run_id)
        actor = request.user.pk if is_signed_in(request.user) else None
        result = async_to_sync(aperform)(ACTIONS[self.action], run.id, executor=get_executor(), actor_id=actor)
        body = {"action": self.action, "runId": result.run_id, "outcome": result.outcome, "newRunId": result.new_run_id}
        return Response(RecoveryResultSerializer(body).data)
