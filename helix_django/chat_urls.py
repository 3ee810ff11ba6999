"""The chat page's URLs: ``path("chat/", include("helix_django.chat_urls"))`` (:mod:`helix_django.chat_views`).

Mount ``helix_django.urls`` too (the page talks to helix's API). Names, namespace
``helix_chat``: ``index`` (the latest chat, or a new one), ``session`` (``c/<id>/``),
``login`` and ``logout`` (the page's own, used where the site set no ``LOGIN_URL``).
"""

from django.urls import path, re_path

from helix_django import chat_views

app_name = chat_views.NAMESPACE
urlpatterns = [
    path("", chat_views.index, name="index"),
    # The id pattern of helix_django.ids.validate_session_id; anything else is a 404.
    re_path(r"^c/(?P<session_id>[A-Za-z0-9_-]{1,128})/$", chat_views.session, name="session"),
    path("login/", chat_views.ChatLoginView.as_view(), name="login"),
    path("logout/", chat_views.ChatLogoutView.as_view(), name="logout"),
]
