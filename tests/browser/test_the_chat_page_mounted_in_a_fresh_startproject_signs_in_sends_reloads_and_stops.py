"""A fresh ``django-admin startproject``, set up from README's words only, serves a working chat page.

The project gets README's install snippets as they are (settings at the end of
``settings.py``, the URLs after ``urlpatterns``, ``asgi.py`` whole), ``migrate``,
``createsuperuser`` and daphne, with the model README configures (the OpenAI provider from
``OPENAI_BASE_URL``/``OPENAI_MODEL``/``OPENAI_API_KEY``) pointed at helix_django.testing's
FakeOpenAI through the real ``openai`` SDK. In Chromium: the signed-out visitor is sent to
the page's own sign-in form, signs in, sends, gets the answer, reloads and sees it once;
a second answer is reloaded while it streams and stopped with Stop. Then README's two curl
commands, run as printed (the user's name, password and port put in), answer: the chat's
SSE events to ``[DONE]``, and a snapshot with both messages.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from helix_django.testing import FakeOpenAI, Reply
from helix_django.testing.live import free_port
from tests.browser.pages import assistant_texts, send, user_texts, wait_until_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
ANSWER = "Hello from your own project's chat page."
PASSWORD = "a-long-demo-password-1"


def readme_block(first_line: str) -> str:
    """Return README's python block that starts with ``first_line``."""
    blocks = re.findall(r"^```python\n(.*?)^```$", README, flags=re.S | re.M)
    (block,) = [b for b in blocks if b.startswith(first_line)]
    return block


def build_project(root: Path) -> None:
    """``startproject mysite`` in ``root``, then README's settings, urls.py and asgi.py."""
    django_admin = str(Path(sys.executable).with_name("django-admin"))
    subprocess.run([django_admin, "startproject", "mysite", str(root)], check=True)
    package = root / "mysite"
    (package / "settings.py").write_text((package / "settings.py").read_text() + "\n" + readme_block("# settings.py"))
    (package / "urls.py").write_text((package / "urls.py").read_text() + "\n" + readme_block("# urls.py"))
    (package / "asgi.py").write_text(readme_block("# asgi.py"))


def project_env(model: FakeOpenAI) -> dict[str, str]:
    """A person's environment: no settings of this suite, the model README's snippet reads."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "HELIX_", "OPENAI_"))}
    env.update(
        OPENAI_BASE_URL=model.base_url,
        OPENAI_MODEL="gpt-test",
        OPENAI_API_KEY="sk-test",
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
    )
    return env


def wait_for_port(port: int, process: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, "daphne exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("daphne never listened")


def readme_curls(port: int) -> list[list[str]]:
    """README's curl commands as argument lists, for user alice on ``port``."""
    (block,) = [b for b in re.findall(r"^```sh\n(.*?)^```$", README, flags=re.S | re.M) if "curl -N" in b]
    block = block.replace("alice:her-password", f"alice:{PASSWORD}").replace("127.0.0.1:8000", f"127.0.0.1:{port}")
    return [shlex.split(command, comments=True) for command in block.replace("\\\n", " ").splitlines()]


def run_statuses(database: Path) -> list[str]:
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=20) as db:
        return [row[0] for row in db.execute("SELECT status FROM helix_django_run ORDER BY created_at")]


def test_a_startproject_site_signs_in_sends_reloads_and_stops_on_its_chat_page(tmp_path, browser):
    root = tmp_path / "project"
    root.mkdir()
    build_project(root)
    gate = threading.Event()
    with FakeOpenAI() as model:
        model.replies += [
            Reply(text=ANSWER),
            Reply(text="An answer that waits for its gate.", gate=gate),
            Reply(text="Hello, curl."),
        ]
        env = project_env(model)
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "--noinput"], cwd=root, env=env, check=True, capture_output=True)
        subprocess.run(
            [*manage, "createsuperuser", "--noinput", "--username", "alice", "--email", "alice@example.com"],
            cwd=root,
            env=env,
            check=True,
            capture_output=True,
        )
        port = free_port()
        log = (tmp_path / "daphne.log").open("w")
        daphne = str(Path(sys.executable).with_name("daphne"))
        server = subprocess.Popen(
            [daphne, "-b", "127.0.0.1", "-p", str(port), "mysite.asgi:application"],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for_port(port, server)
            base = f"http://127.0.0.1:{port}"
            context = browser.new_context(viewport={"width": 1280, "height": 860})
            context.set_default_timeout(20_000)
            page = context.new_page()

            page.goto(f"{base}/chat/")
            assert re.search(r"/chat/login/\?next=/chat/$", page.url), page.url
            page.fill("#id_username", "alice")
            page.fill("#id_password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(re.compile(r".*/chat/c/s_[0-9a-f]{32}/$"))
            page.wait_for_selector("[data-hx=connection][data-status=ready]")

            send(page, "Hello, new project?")
            wait_until_idle(page)
            assert assistant_texts(page) == [ANSWER]
            page.reload()
            page.wait_for_selector("[data-hx=connection][data-status=ready]")
            assert user_texts(page) == ["Hello, new project?"] and assistant_texts(page) == [ANSWER]

            send(page, "Now a long one, please.")
            page.wait_for_selector("[data-hx=stop]:visible")
            page.reload()
            page.wait_for_selector("[data-hx=connection][data-status=streaming]")
            page.click("[data-hx=stop]")
            wait_until_idle(page)
            assert page.locator("[data-hx=stop]").is_hidden()
            assert run_statuses(root / "db.sqlite3") == ["completed", "cancelled"]
            context.close()

            assert shutil.which("curl"), "curl is required"
            chat, snapshot = (subprocess.run(c, capture_output=True, text=True, timeout=60) for c in readme_curls(port))
            assert (
                chat.returncode == 0 and "text-delta" in chat.stdout and chat.stdout.rstrip().endswith("data: [DONE]")
            )
            assert snapshot.returncode == 0 and '"status":"ended"' in snapshot.stdout.replace(" ", "")
            assert "Hello, curl." in snapshot.stdout
            assert [r["body"]["model"] for r in model.requests] == ["gpt-test"] * 3
        finally:
            gate.set()
            server.terminate()
            server.wait(timeout=20)
            log.close()
