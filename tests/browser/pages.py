"""Reading and driving the chat page in tests (selectors of helix_django/chat.html)."""

from __future__ import annotations

import re
import time

from playwright.sync_api import Page

from helix_django.runtime.providers.scripted import default_reply


def session_id_of(page: Page) -> str:
    """Return the session id in the page's URL (``/c/<id>/``)."""
    match = re.search(r"/c/([A-Za-z0-9_-]+)/", page.url)
    assert match, page.url
    return match.group(1)


def send(page: Page, text: str, *, expect_busy: bool = True) -> None:
    """Type ``text`` into the composer and send it; wait until the page shows the send going.

    With ``expect_busy`` it waits for the client to leave ``ready`` (submitted or streaming),
    so a following :func:`wait_until_idle` waits for this answer, not for the state before it.
    """
    page.fill("[data-hx=input]", text)
    page.click("[data-hx=send]")
    if expect_busy:
        page.wait_for_selector(
            "[data-hx=connection][data-status=submitted], [data-hx=connection][data-status=streaming]"
        )


def assistant_texts(page: Page) -> list[str]:
    """Return the text every assistant message shows, in order.

    Each block of its rendered Markdown (a paragraph, a list, a code block) is read with its
    whitespace collapsed, blocks separated by a blank line: an answer of plain paragraphs
    reads as :func:`as_shown` of its source. Read from the DOM, not from the layout
    (``innerText``), so the result never depends on when the browser last laid the page out.
    """
    return page.eval_on_selector_all(
        "article[data-role=assistant]",
        """nodes => nodes.map(n => [...n.querySelectorAll('.hx-markdown')]
              .map(md => [...md.children]
                .map(block => block.textContent.replace(/\\s+/g, ' ').trim())
                .filter(Boolean)
                .join('\\n\\n'))
              .join(''))""",
    )


def as_shown(text: str) -> str:
    """Return how the page shows ``text`` of plain paragraphs: whitespace within a paragraph collapsed, none at its ends."""
    paragraphs = (" ".join(paragraph.split()) for paragraph in text.split("\n\n"))
    return "\n\n".join(paragraph for paragraph in paragraphs if paragraph)


def user_texts(page: Page) -> list[str]:
    """Return the rendered text of every user message, in order."""
    return page.eval_on_selector_all(
        "article[data-role=user]",
        "nodes => nodes.map(n => [...n.querySelectorAll('.hx-text')].map(t => t.textContent).join(''))",
    )


def connection_status(page: Page) -> str:
    """Return the client's status (loading, ready, submitted, streaming, reconnecting, error)."""
    return page.get_attribute("[data-hx=connection]", "data-status") or ""


def wait_for_chars(page: Page, count: int, timeout: float = 20.0) -> int:
    """Wait until the last assistant message shows at least ``count`` characters; return its length."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        texts = assistant_texts(page)
        if texts and len(texts[-1]) >= count:
            return len(texts[-1])
        time.sleep(0.02)
    raise AssertionError(f"the answer did not reach {count} characters: {assistant_texts(page)!r}")


def wait_until_idle(page: Page, timeout: float = 40.0) -> None:
    """Wait until the client is ``ready`` (the run ended and the page settled on the snapshot)."""
    try:
        page.wait_for_selector("[data-hx=connection][data-status=ready]", timeout=timeout * 1000)
    except Exception as exc:
        raise AssertionError(f"the page did not settle: {describe(page)}") from exc


def expected_reply(question: str) -> str:
    """The scripted provider's answer to ``question`` (its default script)."""
    return default_reply(question)


def committed(session_id: str) -> list[dict]:
    """Return the session's committed messages as ``{role, text, helix}`` rows, in order."""
    from helix_django.models import Message

    rows = Message.objects.filter(session_id=session_id, position__isnull=False).order_by("position")
    return [{"role": m.role, "text": m.text, "helix": (m.metadata or {}).get("helix")} for m in rows]


def current_run_status(session_id: str) -> str | None:
    """Return the status of the session's current run."""
    from helix_django.models import ChatSession

    session = ChatSession.objects.select_related("current_run").get(pk=session_id)
    return session.current_run.status if session.current_run else None


def describe(page: Page) -> str:
    """Return the client's status, error and the rendered conversation (for failure messages)."""
    return page.evaluate(
        """() => {
          const view = window.helixChat?.chat?.view();
          return JSON.stringify({status: view?.status, error: view?.error, cursor: view?.cursor,
            runStatus: view?.runStatus, messages: view?.messages.map(m => [m.role, m.parts.filter(p => p.type === 'text').map(p => p.text).join('').length])});
        }"""
    )
