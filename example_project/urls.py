"""URLs of the example site: the chat page, helix_django's API, login and the admin."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from example_project.chat.recovery_api import OWNER_ACTIONS, RunActionView, RunRecoveryView

RUN = "helix/api/sessions/<str:session_id>/runs/<str:run_id>/"

urlpatterns = [
    path(f"{RUN}recovery", RunRecoveryView.as_view(), name="run-recovery"),
    *(path(f"{RUN}{action}", RunActionView.as_view(action=action), name=f"run-{action}") for action in OWNER_ACTIONS),
    path("helix/api/", include("helix_django.urls")),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("example_project.chat.urls")),
]
