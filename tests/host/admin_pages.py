"""Helix's admin pages on a live host site, as staff (logged in through the admin's login form) and as a non-staff user.

:func:`staff_admin` returns the staff user's browser (a Django session from the login
form), :func:`admin_answers` the answer of every helix admin page of one session and one
run: the session and run lists and change pages, the dashboard, a recovery confirmation
page, the message and stream-chunk lists.
"""

from __future__ import annotations

import httpx
from django.contrib.admin.utils import quote
from django.utils.crypto import get_random_string

from tests.host.sites import HostSite
from tests.host.surfaces import Answer

ADMIN = "/admin/helix_django"


def admin_paths(session_id: str, run_id: str) -> dict[str, str]:
    """Every helix admin page of ``session_id`` and ``run_id``, by name (ids quoted as the admin's URLs quote them)."""
    session_id, run_id = quote(session_id), quote(run_id)
    return {
        "admin sessions": f"{ADMIN}/chatsession/",
        "admin session": f"{ADMIN}/chatsession/{session_id}/change/",
        "admin runs": f"{ADMIN}/run/?view=attention",
        "admin run": f"{ADMIN}/run/{run_id}/change/",
        "admin dashboard": f"{ADMIN}/run/dashboard/",
        "admin recovery": f"{ADMIN}/run/{run_id}/recovery/cancel/",
        "admin messages": f"{ADMIN}/message/",
        "admin chunks": f"{ADMIN}/streamchunk/",
    }


def staff_admin(site: HostSite, headers: dict[str, str]) -> httpx.Client:
    """The staff user's browser, logged in through ``/admin/login/`` (helix's permissions granted first)."""
    from django.contrib.auth.models import Permission

    staff = site.users["staff"].user
    staff.user_permissions.set(Permission.objects.filter(content_type__app_label="helix_django"))
    token = get_random_string(32)
    browser = httpx.Client(timeout=30, headers=headers)
    browser.cookies["csrftoken"] = token
    scheme = "https" if headers.get("X-Forwarded-Proto") == "https" else "http"
    login = browser.post(
        site.url("/admin/login/"),
        data={"username": staff.email, "password": "pw-1", "csrfmiddlewaretoken": token, "next": "/admin/"},
        headers={"Referer": site.url("/admin/login/").replace("http://", f"{scheme}://")},
    )
    assert login.status_code == 302, (login.status_code, login.text[:500])
    return browser


def admin_answers(site: HostSite, browser: httpx.Client, session_id: str, run_id: str) -> list[Answer]:
    """Every page of :func:`admin_paths` as ``browser`` sees it (no redirect followed)."""
    answers = []
    for name, path in admin_paths(session_id, run_id).items():
        response = browser.get(site.url(path), follow_redirects=False)
        answers.append(Answer(name, response.status_code, response.headers, response.text))
    return answers
