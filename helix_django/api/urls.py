"""URL patterns of the DRF endpoints (mounted by :mod:`helix_django.urls`)."""

from typing import Any

from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView

from helix_django import __version__
from helix_django.api import recovery, views

endpoint_patterns = [
    path("sessions/", views.SessionListView.as_view(), name="session-list"),
    path("sessions/<str:session_id>/", views.SessionDetailView.as_view(), name="session-detail"),
    path("sessions/<str:session_id>/snapshot", views.SnapshotView.as_view(), name="session-snapshot"),
    path("sessions/<str:session_id>/runs/", views.RunListView.as_view(), name="run-list"),
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


class HelixSchemaView(SpectacularAPIView):
    """The OpenAPI schema of the helix endpoints only, with paths under the prefix the site mounted them at."""

    custom_settings = {
        "TITLE": "helix_django",
        "DESCRIPTION": "Durable, resumable AI chat generations: sessions, snapshots, runs, recovery actions.",
        "VERSION": __version__,
    }

    def _get_schema_response(self, request: Any) -> Any:
        prefix = request.path[: -len("schema/")].lstrip("/")
        self.patterns = [path(prefix, include(endpoint_patterns))]
        return super()._get_schema_response(request)


urlpatterns = [
    *endpoint_patterns,
    path("schema/", HelixSchemaView.as_view(), name="schema"),
    re_path(r"^", views.RouteNotFoundView.as_view(), name="not-found"),
]
