"""``ALLOW_ANONYMOUS`` under permission classes that refuse an anonymous caller is warned (W008).

Tried as a new user: a host with ``DEFAULT_PERMISSION_CLASSES = [IsAuthenticated]`` set
``HELIX["ALLOW_ANONYMOUS"] = True``; its chat page let an anonymous visitor in and showed
"Not sent. Authentication credentials were not provided" for every message, with
``manage.py check`` silent.
"""

from __future__ import annotations

from django.core import checks
from django.test import override_settings

from helix_django.access.checks import check_anonymous_chat_is_permitted

REQUIRES_SIGN_IN = {"DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"]}
HINT = (
    "Set HELIX['PERMISSION_CLASSES'] = ['rest_framework.permissions.AllowAny'] (each owner still reaches "
    "only their own sessions), or turn ALLOW_ANONYMOUS off."
)


def w008(classes: str) -> checks.Warning:
    return checks.Warning(
        f"HELIX['ALLOW_ANONYMOUS'] is on, but the permission classes of helix's routes refuse an anonymous "
        f"caller ({classes}): anonymous visitors reach the chat page and every send is refused "
        "(401 auth_not_authenticated).",
        hint=HINT,
        id="helix_django.W008",
    )


@override_settings(REST_FRAMEWORK=REQUIRES_SIGN_IN, HELIX={"ALLOW_ANONYMOUS": True})
def test_anonymous_chat_under_the_hosts_is_authenticated_is_warned():
    assert check_anonymous_chat_is_permitted() == [w008("rest_framework.permissions.IsAuthenticated")]
    assert "helix_django.W008" in [m.id for m in checks.run_checks()]


@override_settings(
    REST_FRAMEWORK=REQUIRES_SIGN_IN,
    HELIX={"ALLOW_ANONYMOUS": True, "PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticatedOrReadOnly"]},
)
def test_helix_permission_classes_that_refuse_an_anonymous_send_are_warned():
    assert check_anonymous_chat_is_permitted() == [w008("rest_framework.permissions.IsAuthenticatedOrReadOnly")]


@override_settings(
    REST_FRAMEWORK=REQUIRES_SIGN_IN,
    HELIX={"ALLOW_ANONYMOUS": True, "PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"]},
)
def test_helix_own_allow_any_under_the_hosts_is_authenticated_is_quiet():
    assert check_anonymous_chat_is_permitted() == []


@override_settings(REST_FRAMEWORK=REQUIRES_SIGN_IN, HELIX={})
def test_signed_in_chat_under_is_authenticated_is_quiet():
    assert check_anonymous_chat_is_permitted() == []


@override_settings(REST_FRAMEWORK={}, HELIX={"ALLOW_ANONYMOUS": True})
def test_anonymous_chat_under_drfs_default_allow_any_is_quiet():
    assert check_anonymous_chat_is_permitted() == []
