"""URLs of the chat page."""

from django.urls import path, re_path

from example_project.chat import views

app_name = "chat"
urlpatterns = [
    path("", views.index, name="index"),
    # The id pattern of helix_django.ids.validate_session_id; anything else is a 404.
    re_path(r"^c/(?P<session_id>[A-Za-z0-9_-]{1,128})/$", views.session, name="session"),
]
