"""System checks of how a host serves helix: ASGI wiring (W030), the DRF policy (E030, E031); config errors logged."""

from __future__ import annotations

import logging

import pytest
from django.core.checks import Error, Warning
from django.test import modify_settings, override_settings
from rest_framework.test import APIClient

from helix_django.deploy_checks import check_asgi_wiring, check_drf_policy

HINT = (
    "Serve the site with an ASGI server (daphne) and set ASGI_APPLICATION to an application built by "
    "helix_django.transport.routing.get_asgi_application() (README, 'Install')."
)


def test_the_suites_asgi_application_serves_the_chat_route():
    assert check_asgi_wiring() == []


@pytest.mark.parametrize(
    ("asgi_application", "message"),
    [
        (
            "tests.transport.ping_app.application",
            "ASGI_APPLICATION 'tests.transport.ping_app.application' does not route helix's chat route.",
        ),
        ("tests.nowhere.application", "ASGI_APPLICATION 'tests.nowhere.application' cannot be imported."),
    ],
)
def test_a_wsgi_only_or_unwired_site_is_warned(asgi_application, message):
    with override_settings(ASGI_APPLICATION=asgi_application):
        assert check_asgi_wiring() == [Warning(message, hint=HINT, id="helix_django.W030")]


@pytest.mark.parametrize("asgi_application", [None, ""])
def test_an_unset_asgi_application_is_warned_with_daphne_first_in_installed_apps(asgi_application):
    """Found by a new user: `runserver` served WSGI, every chat request a 501."""
    with override_settings(ASGI_APPLICATION=asgi_application):
        assert check_asgi_wiring() == [
            Warning(
                "ASGI_APPLICATION is not set: `manage.py runserver` serves WSGI and the chat and stream routes "
                "cannot stream.",
                hint="Add 'daphne' to INSTALLED_APPS, first (runserver then serves ASGI), and set ASGI_APPLICATION "
                "to an application built by helix_django.transport.routing.get_asgi_application(), e.g. "
                "'mysite.asgi.application' (README, 'Install').",
                id="helix_django.W030",
            )
        ]


async def _django_app(scope, receive, send):  # never called: the routes are only inspected
    raise AssertionError(scope)


def _wired_at(prefix: str):
    from helix_django.transport.routing import get_asgi_application

    return get_asgi_application(_django_app, prefix=prefix)


ROUTED_AT_API_AI = _wired_at("api/ai/")
ROUTED_WITHOUT_ITS_SLASH = _wired_at("helix/api")
ROUTED_AT_THE_URLCONFS_PREFIX = _wired_at("helix/api/")


@pytest.mark.parametrize("app", ["ROUTED_AT_API_AI", "ROUTED_WITHOUT_ITS_SLASH"])
def test_an_asgi_prefix_other_than_the_urlconfs_is_warned(app):
    """Found by a new user (seventeenth session): check was clean, every chat request a 501."""
    with override_settings(ASGI_APPLICATION=f"tests.core.test_deploy_checks.{app}"):
        messages = check_asgi_wiring()
    assert [m.id for m in messages] == ["helix_django.W030"]
    assert "'/helix/api/sessions/wiring_check/chat' is not routed to it" in messages[0].msg
    assert "prefix=" in messages[0].hint


def test_the_urlconfs_prefix_in_the_asgi_application_is_clean():
    with override_settings(ASGI_APPLICATION="tests.core.test_deploy_checks.ROUTED_AT_THE_URLCONFS_PREFIX"):
        assert check_asgi_wiring() == []


def test_a_throttle_without_a_rate_is_an_error_not_a_500_per_request():
    broken = {"DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.UserRateThrottle"], "DEFAULT_THROTTLE_RATES": {}}
    with override_settings(REST_FRAMEWORK=broken):
        [error] = check_drf_policy()
    assert error.id == "helix_django.E030" and "No default throttle rate set for 'user' scope" in error.msg


def test_a_pagination_class_helix_cannot_import_is_reported():
    with override_settings(HELIX={"PAGINATION_CLASS": "tests.nowhere.Paginator"}):
        [error] = check_drf_policy()
    assert error.id == "helix_django.E030" and "PAGINATION_CLASS" in error.hint
    with override_settings(HELIX={"PAGINATION_CLASS": "tests.paginators.PagesOfThree"}):
        assert check_drf_policy() == []


def test_a_scoped_rate_throttle_host_without_helix_scopes_passes():
    scoped = {
        "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.ScopedRateThrottle"],
        "DEFAULT_THROTTLE_RATES": {},
    }
    with override_settings(REST_FRAMEWORK=scoped):
        assert check_drf_policy() == []


@pytest.mark.django_db
def test_token_auth_without_authtoken_is_an_error():
    with (
        override_settings(HELIX={"AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"]}),
        modify_settings(INSTALLED_APPS={"remove": "rest_framework.authtoken"}),
    ):
        assert check_drf_policy() == [
            Error(
                "TokenAuthentication is configured for helix's routes but rest_framework.authtoken is not installed.",
                hint="Add 'rest_framework.authtoken' to INSTALLED_APPS, or remove TokenAuthentication.",
                id="helix_django.E031",
            )
        ]


@pytest.mark.django_db
def test_a_configuration_error_is_logged_with_its_message(caplog):
    broken = {"DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.UserRateThrottle"], "DEFAULT_THROTTLE_RATES": {}}
    with override_settings(REST_FRAMEWORK=broken), caplog.at_level(logging.ERROR):
        response = APIClient().get("/helix/api/sessions/")
    assert response.status_code == 500 and response.json()["code"] == "framework_internal_error"
    assert "No default throttle rate set for 'user' scope" in caplog.text


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "route"), [("get", "chat"), ("post", "chat"), ("get", "stream")])
def test_a_streaming_route_reaching_django_is_a_typed_501(method, route):
    response = getattr(APIClient(), method)(
        f"/helix/api/sessions/s_1/{route}"
    )  # Django's handler, not helix's ASGI routes
    assert response.status_code == 501
    assert response.json()["code"] == "transport_route_not_wired"
