"""The same chat page talks to an OpenAI-compatible model when OPENAI_BASE_URL is set.

The example site is started with only the environment a person would set; the model is
helix_django.testing's local OpenAI-compatible server (FakeOpenAI), reached by the real ``openai`` SDK.
"""

from __future__ import annotations

import pytest

from helix_django.testing import FakeOpenAI, Reply
from tests.browser.conftest import make_user, sign_in
from tests.browser.pages import assistant_texts, committed, send, session_id_of, user_texts, wait_until_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ANSWER = "Hello from an OpenAI-compatible model, streamed through helix_django."


def test_openai_base_url_switches_the_default_agent(browser, daphne_server_factory):
    with FakeOpenAI() as model:
        model.replies.append(Reply(text=ANSWER))
        site = daphne_server_factory(
            asgi_app="example_project.asgi:application",
            settings_module="tests.browser.settings",
            env={"OPENAI_BASE_URL": model.base_url, "OPENAI_MODEL": "gpt-test", "OPENAI_API_KEY": "test-key"},
        )
        user, password = make_user()
        page = sign_in(browser, site, user, password)
        send(page, "Which model answers?")
        wait_until_idle(page)

        assert assistant_texts(page) == [ANSWER]
        assert user_texts(page) == ["Which model answers?"]
        assert [r["text"] for r in committed(session_id_of(page))] == ["Which model answers?", ANSWER]
        (request,) = model.requests
        assert request["body"]["model"] == "gpt-test"
        assert "Which model answers?" in str(request["body"]["messages"])
        page.context.close()
