"""Take the chat page's screenshots: a Markdown answer at 1280 px and at 390 px (menu closed and open).

    .venv/bin/python scripts/chat_screenshots.py [--out docs]

Runs the example site (tests/browser/settings.py: the example's settings with HELIX
overrides) on a throw-away SQLite file, with the scripted model answering a question about
installing with the Markdown of ``ANSWER``, signs in in headless Chromium (/usr/bin/chromium)
and writes chat-1280.png, chat-390.png and chat-390-menu.png into ``--out``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from example_site import CHROMIUM_ARGS, ROOT, example_site, signed_in
from playwright.sync_api import sync_playwright

QUESTION = "How do I add helix_django to my project?"
ANSWER = """Three steps take a Django project to durable, resumable answers:

1. Install the package and its extras:

   ```sh
   pip install "helix-django[openai]"
   ```

2. Add the app and mount its URLs:

   ```python
   INSTALLED_APPS += ["rest_framework", "channels", "helix_django"]
   urlpatterns += [path("helix/", include("helix_django.urls"))]
   ```

3. Run `python manage.py migrate` and open the chat page.

What you get:

- answers stored chunk by chunk, so a **reload** resumes exactly where it was;
- interrupted answers kept with *Continue*, *Regenerate*, *Keep* and *Discard*;
- a support view in the Django admin.

Read [the deployment checklist](https://docs.djangoproject.com/en/5.2/howto/deployment/checklist/) first.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    scripted = {
        "BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider",
        "OPTIONS": {"PACE_TPS": 200, "RULES": [{"MATCH": "(?i)add helix_django", "TEXT": ANSWER}]},
    }
    overrides = json.dumps({"AGENTS": {"default": {"PROVIDER": scripted}}})
    env = {"DJANGO_SETTINGS_MODULE": "tests.browser.settings", "HELIX_TEST_OVERRIDES": overrides}
    with example_site(env) as (base, password), sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        wide = signed_in(browser, base, password, 1280, 860)
        wide.fill("[data-hx=input]", QUESTION)
        wide.click("[data-hx=send]")
        wide.wait_for_selector("[data-hx=connection][data-status=streaming]")
        wide.wait_for_selector("[data-hx=connection][data-status=ready]", timeout=60_000)
        wide.wait_for_selector("article[data-role=assistant] pre code")
        wide.screenshot(path=str(out / "chat-1280.png"))
        phone = signed_in(browser, base, password, 390, 844)
        phone.goto(wide.url)
        phone.wait_for_selector("article[data-role=assistant] pre code")
        phone.wait_for_selector("[data-hx=connection][data-status=ready]")
        phone.screenshot(path=str(out / "chat-390.png"))
        phone.click("[data-hx=menu]")
        phone.wait_for_selector("[data-hx=sidebar]", state="visible")
        phone.screenshot(path=str(out / "chat-390-menu.png"))
        browser.close()
    print(f"wrote chat-1280.png, chat-390.png and chat-390-menu.png into {out}")


if __name__ == "__main__":
    main()
