"""The example site for the screenshot scripts: a throw-away SQLite file, user ``ada``, daphne on a free port.

with example_site({"DJANGO_SETTINGS_MODULE": "example_project.settings"}, staff=True) as (base, password):
    page = signed_in(browser, base, password, 1280, 800)
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from playwright.sync_api import Browser, Page

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def free_port() -> int:
    """Return a free TCP port on the loopback interface."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def example_site(env_overrides: dict[str, str], *, staff: bool = False) -> Iterator[tuple[str, str]]:
    """Migrate a throw-away SQLite database, create ``ada`` (staff with helix's permissions when
    ``staff``), run daphne on a free port; yield ``(base URL, ada's password)``, stop daphne after.

    ``env_overrides``: the settings module and HELIX test overrides; no real model key leaks in.
    """
    workdir = Path(tempfile.mkdtemp(prefix="helix-shot-"))
    env = {**os.environ, "HELIX_SQLITE_PATH": str(workdir / "db.sqlite3"), "PYTHONPATH": str(ROOT), **env_overrides}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "HELIX_TEST_DATABASE_URL"):
        env.pop(name, None)
    python = sys.executable
    subprocess.run([python, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)  # noqa: S603
    password = "screenshot-" + os.urandom(6).hex()
    create = (
        "from django.contrib.auth import get_user_model;"
        "from django.contrib.auth.models import Permission;"
        f"u = get_user_model().objects.create_user('ada', password='{password}', is_staff={staff});"
        f"{staff} and u.user_permissions.set(Permission.objects.filter(content_type__app_label='helix_django'))"
    )
    subprocess.run([python, "manage.py", "shell", "-c", create], cwd=ROOT, env=env, check=True)  # noqa: S603
    port = free_port()
    server = subprocess.Popen(  # noqa: S603
        [str(Path(python).with_name("daphne")), "-b", "127.0.0.1", "-p", str(port), "example_project.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                httpx.get(base + "/accounts/login/", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield base, password
    finally:
        server.terminate()
        server.wait(10)


def signed_in(browser: Browser, base: str, password: str, width: int, height: int) -> Page:
    """Return a page of ``width`` x ``height`` px signed in as ``ada``, on the chat page, idle."""
    page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=1)
    page.goto(base + "/accounts/login/")
    page.fill("#id_username", "ada")
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_selector("[data-hx=connection][data-status=ready]")
    return page
