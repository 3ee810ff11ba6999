"""The chat page and the admin run page in German, as a host with LocaleMiddleware serves them.

The example site's wiring (example_project.settings: LocaleMiddleware, LANGUAGES) picks
the language from the browser's Accept-Language; without one the page stays English.
"""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from example_project import settings as example
from tests.recovery.factories import InFlight

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def example_site(settings):
    """tests.settings with the example site's URLs and its language middleware and languages."""
    settings.ROOT_URLCONF = "example_project.urls"
    settings.MIDDLEWARE = example.MIDDLEWARE
    settings.LANGUAGES = example.LANGUAGES
    return settings


@pytest.fixture
def user_client():
    client = Client()
    client.force_login(get_user_model().objects.create_user("reader", password="pw"))
    return client


def _js_catalog(html: str) -> dict:
    match = re.search(r'<script id="helix-js-catalog" type="application/json">(.*?)</script>', html, re.S)
    assert match, "the page embeds no JS catalog"
    return json.loads(match.group(1))


def test_the_chat_page_is_german_for_a_german_browser(example_site, user_client):
    response = user_client.get("/c/s_i18n/", HTTP_ACCEPT_LANGUAGE="de-DE,de;q=0.9,en;q=0.5")
    html = response.content.decode()
    assert response.status_code == 200
    assert '<html lang="de" dir="ltr">' in html
    for text in ("Neuer Chat", "Unterhaltungen", "Abmelden", "Nachricht an den Assistenten …", ">Senden<", ">Stoppen<"):
        assert text in html, text
    assert ">Send<" not in html
    catalog = _js_catalog(html)["catalog"]
    assert catalog["Start a conversation"] == "Eine Unterhaltung beginnen"
    assert catalog["Connected"] == "Verbunden"


def test_the_chat_page_stays_english_without_accept_language(example_site, user_client):
    html = user_client.get("/c/s_i18n/").content.decode()
    assert '<html lang="en" dir="ltr">' in html
    assert ">Send<" in html and "New chat" in html
    assert _js_catalog(html) == {"catalog": {}, "plural": None}


def test_the_admin_run_page_is_german_for_a_german_browser(settings):
    session, *others = settings.MIDDLEWARE  # LocaleMiddleware after SessionMiddleware, as Django's docs place it
    settings.MIDDLEWARE = [session, "django.middleware.locale.LocaleMiddleware", *others]
    flight = InFlight("s-i18n-admin")
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("admin-de", password="pw"))
    url = reverse("admin:helix_django_run_change", args=[quote(flight.run_id)])
    response = client.get(url, HTTP_ACCEPT_LANGUAGE="de")
    html = response.content.decode()
    assert response.status_code == 200
    assert 'lang="de"' in html
    for text in (
        "Auf einen Blick",  # the run page's own template
        "Unterbrechung und Wiederherstellung",  # a fieldset of the admin class
        "Als unterbrochen markieren",  # a recovery action's title
        "Werkzeugausführungen",
        "streamt",  # the run's status label (a model choice)
    ):
        assert text in html, text
    assert "At a glance" not in html
