"""URL patterns of the DRF endpoints (mounted by :mod:`helix_django.urls`)."""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView

from helix_django.api import views

urlpatterns = [
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
    path("schema/", SpectacularAPIView.as_view(urlconf="helix_django.urls"), name="schema"),
]
