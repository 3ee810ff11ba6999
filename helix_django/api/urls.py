"""URL patterns of the DRF endpoints (mounted by :mod:`helix_django.urls`)."""

from typing import Any

from django.urls import get_script_prefix, include, path, re_path
from drf_spectacular.views import SpectacularAPIView

from helix_django import __version__
from helix_django.access import policy
from helix_django.api import recovery, streaming_routes, views
from helix_django.api.errors import TypedRefusals

endpoint_patterns = [
    # Served by the ASGI consumers of helix_django.transport.routing; these Django views only
    # name them (reverse(), the schema) and answer 501 where the ASGI routing is missing.
    path("sessions/<str:session_id>/chat", streaming_routes.ChatRouteView.as_view(), name="chat"),
    path("sessions/<str:session_id>/stream", streaming_routes.StreamRouteView.as_view(), name="stream"),
    path("sessions/", views.SessionListView.as_view(), name="session-list"),
    path("sessions/<str:session_id>/", views.SessionDetailView.as_view(), name="session-detail"),
    path("sessions/<str:session_id>/snapshot", views.SnapshotView.as_view(), name="session-snapshot"),
    path("sessions/<str:session_id>/runs/", views.RunListView.as_view(), name="run-list"),
    path(
        "sessions/<str:session_id>/queued/<str:queued_message_id>",
        views.QueuedMessageView.as_view(),
        name="queued-message",
    ),
    path("sessions/<str:session_id>/runs/<str:run_id>/cancel", views.RunCancelView.as_view(), name="run-cancel"),
    path(
        "sessions/<str:session_id>/runs/<str:run_id>/tool-results",
        views.ToolResultsView.as_view(),
        name="run-tool-results",
    ),
    path(
        "sessions/<str:session_id>/runs/<str:run_id>/recovery",
        recovery.RunRecoveryView.as_view(),
        name="run-recovery",
    ),
    *(
        path(
            f"sessions/<str:session_id>/runs/<str:run_id>/{action}",
            recovery.RunRecoveryActionView.as_view(action=action),
            name=f"run-{action}",
        )
        for action in recovery.OWNER_ACTIONS
    ),
]


class HelixSchemaView(TypedRefusals, SpectacularAPIView):
    """The OpenAPI schema of the helix endpoints only, with paths under the prefix the site mounted them at.

    The paths carry the site's script prefix (``FORCE_SCRIPT_NAME`` or the server's root
    path), as ``reverse()`` writes them: see :func:`mount_point`.

    Served as YAML (``?format=json`` or an OpenAPI JSON ``Accept``: JSON); its refusals
    (an unserved format, a bad credential, a throttle) are typed JSON as every helix endpoint's.
    """

    custom_settings = {
        "TITLE": "helix_django",
        "DESCRIPTION": (
            "Durable, resumable AI chat generations: sessions, snapshots, runs, recovery actions, the chat route "
            "and the raw stream route (SSE). The same stream is offered over a WebSocket at "
            "`ws/<prefix>sessions/{session_id}/` (JSON frames `{type: 'chunk', sequence, chunk}`; send "
            "`{type: 'resume', from_sequence}`), which OpenAPI cannot describe."
        ),
        "VERSION": __version__,
    }

    versioning_class = None  # helix's URLs are the same under any host versioning scheme
    throttle_scope = policy.API_SCOPE

    def get_authenticators(self) -> list[Any]:
        """Return the authenticators of every helix route (:func:`helix_django.access.policy.authenticators`).

        Its permission stays drf-spectacular's ``SERVE_PERMISSIONS`` (public by default); a
        credential it is sent is checked as on the chat route: an invalid one is a typed 401.
        """
        return policy.authenticators()

    def get_throttles(self) -> list[Any]:
        """Return helix's throttles as read now (APIView's class attribute froze the DRF settings of its import)."""
        return policy.throttles()

    def _get_schema_response(self, request: Any) -> Any:
        self.patterns = [path(mount_point(request), include(endpoint_patterns))]
        return super()._get_schema_response(request)


def mount_point(request: Any) -> str:
    """Return the URL prefix helix is served at, as a client calls it: ``"app/helix/api/"`` (no leading slash).

    The script prefix ``reverse()`` uses (``FORCE_SCRIPT_NAME``, else the server's
    ``SCRIPT_NAME`` / ASGI ``root_path``), then the request's ``path_info`` up to ``schema/``
    or ``schema`` (the schema is served at both).
    """
    trimmed = request.path_info.rstrip("/")
    return (get_script_prefix().rstrip("/") + trimmed[: trimmed.rindex("/") + 1]).lstrip("/")


urlpatterns = [
    *endpoint_patterns,
    path("schema/", HelixSchemaView.as_view(), name="schema"),
    # The session list without its slash: with the host's APPEND_SLASH a POST there was Django's HTML 500
    # (it cannot redirect a POST), a GET an HTML 301. Outside the schema.
    path("sessions", views.SessionListView.as_view(), name="session-list-unslashed"),
    # The schema without its slash, for the same reason (a POST there was Django's HTML 500 under DEBUG).
    path("schema", HelixSchemaView.as_view(), name="schema-unslashed"),
    # The AI SDK's default send and reconnect shape (transport/aisdk.py), outside the schema: 501 where
    # the ASGI routing is missing, as the chat route's stand-in answers.
    path("chat", streaming_routes.NotWiredView.as_view(), name="aisdk-chat"),
    path("chat/<str:session_id>/stream", streaming_routes.NotWiredView.as_view(), name="aisdk-stream"),
    # Typed 404s for unknown paths of helix's own tree only (a trailing slash on a route included):
    # host routes after the include still resolve.
    re_path(r"^sessions/", views.RouteNotFoundView.as_view(), name="not-found"),
    re_path(r"^chat/", views.RouteNotFoundView.as_view(), name="aisdk-not-found"),
]
