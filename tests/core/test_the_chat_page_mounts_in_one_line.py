"""A site mounts the chat page in one line and it needs no URL name or template of the site.

``path("chat/", include("helix_django.chat_urls"))`` next to ``helix_django.urls``, in a
URLconf with no admin, no ``login``/``logout`` names and no ``registration/login.html``:
a signed-out visitor goes to the page's own sign-in form (or to ``LOGIN_URL`` where the
site set one), signs in, lands on a chat, and logs out; with ``ALLOW_ANONYMOUS`` anyone
chats without signing in. This file is the URLconf of its tests.
"""

from __future__ import annotations

import re
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from django.urls import include, path

from helix_django.models import ChatSession

urlpatterns = [
    path("helix/api/", include("helix_django.urls")),
    path("chat/", include("helix_django.chat_urls")),
]

pytestmark = [pytest.mark.django_db, pytest.mark.urls(__name__)]

CHAT = re.compile(r"^/chat/c/(s_[0-9a-f]{32})/$")


def opens_empty(html: str) -> bool:
    """Whether the page's root element says the visitor has no chat with this id yet."""
    return re.search(r'data-session-id="[^"]+"\s+data-new-session\s', html) is not None


def make_user(**extra):
    password = uuid.uuid4().hex
    user = get_user_model().objects.create_user(username=f"u{uuid.uuid4().hex[:8]}", password=password, **extra)
    return user, password


def test_a_signed_out_visitor_signs_in_on_the_pages_own_form_and_lands_on_a_chat():
    client = Client()
    first = client.get("/chat/")
    assert first.status_code == 302 and first.headers["location"] == "/chat/login/?next=/chat/"

    form = client.get(first.headers["location"])
    assert form.status_code == 200
    assert b'name="username"' in form.content and b'name="password"' in form.content

    user, password = make_user()
    signed = client.post(
        "/chat/login/?next=/chat/", {"username": user.username, "password": password, "next": "/chat/"}
    )
    assert signed.status_code == 302 and signed.headers["location"] == "/chat/"
    landing = client.get("/chat/")
    assert landing.status_code == 302 and CHAT.match(landing.headers["location"])

    page = client.get(landing.headers["location"])
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-api-base="/helix/api"' in html and 'data-chat-url="/chat/c/__session__/"' in html
    assert opens_empty(html) and 'action="/chat/logout/"' in html
    assert "admin-link" not in html

    out = client.post("/chat/logout/")
    assert out.status_code == 302 and out.headers["location"] == "/chat/"
    assert client.get("/chat/").headers["location"].startswith("/chat/login/")


def test_a_failed_sign_in_is_told_on_the_form():
    user, _ = make_user()
    answer = Client().post("/chat/login/", {"username": user.username, "password": "wrong"})
    assert answer.status_code == 200 and b"errorlist" in answer.content


def test_the_sites_login_url_is_used_where_it_set_one():
    with override_settings(LOGIN_URL="/accounts/sign-in/"):
        answer = Client().get("/chat/c/s_abc/")
    assert answer.status_code == 302 and answer.headers["location"] == "/accounts/sign-in/?next=/chat/c/s_abc/"


def test_a_user_opens_their_latest_chat_and_staff_without_an_admin_route_get_no_admin_link():
    user, password = make_user(is_staff=True)
    ChatSession.objects.create(id="s_older", owner=user)
    client = Client()
    client.login(username=user.username, password=password)
    assert client.get("/chat/").headers["location"] == "/chat/c/s_older/"
    page = client.get("/chat/c/s_older/")
    assert page.status_code == 200
    assert not opens_empty(page.content.decode()) and b"admin-link" not in page.content
    assert Client().get("/chat/c/not%20an%20id/").status_code in (302, 404)


def test_with_allow_anonymous_a_visitor_chats_without_signing_in():
    with override_settings(HELIX={"ALLOW_ANONYMOUS": True}):
        client = Client()
        landing = client.get("/chat/")
        assert landing.status_code == 302 and CHAT.match(landing.headers["location"])
        page = client.get(landing.headers["location"])
    assert page.status_code == 200
    html = page.content.decode()
    assert opens_empty(html) and "/chat/logout/" not in html


def test_under_login_required_middleware_the_page_still_signs_in_on_its_own_form(settings):
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "django.contrib.auth.middleware.LoginRequiredMiddleware"]
    client = Client()
    first = client.get("/chat/")
    assert first.status_code == 302 and first.headers["location"] == "/chat/login/?next=/chat/"
    assert client.get(first.headers["location"]).status_code == 200
    with override_settings(HELIX={"ALLOW_ANONYMOUS": True}):
        landing = client.get("/chat/")
        assert CHAT.match(landing.headers["location"]) and client.get(landing.headers["location"]).status_code == 200
