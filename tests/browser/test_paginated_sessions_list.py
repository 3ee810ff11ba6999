"""The chat page's conversation list reads a paginated sessions list (issue 19): the host's paginator's first page.

The site paginates helix's lists with ``PageNumberPagination`` of three a page
(``HELIX["PAGINATION_CLASS"]``); the sidebar shows that page's sessions, newest first,
as it shows the plain list of a site without pagination (the other browser tests).
"""

from __future__ import annotations

import pytest

from helix_django import store
from helix_django.models import ChatSession
from tests.browser.conftest import make_user, sign_in, site_server

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_sidebar_lists_the_first_page_of_a_paginated_sessions_list(browser, daphne_server_factory):
    site = site_server(daphne_server_factory, PAGINATION_CLASS="tests.paginators.PagesOfThree")
    user, password = make_user()
    for index in range(5):
        session, _created = store.get_or_create_session(f"chat_paged_{index}", owner_id=user.pk)
        ChatSession.objects.filter(pk=session.pk).update(title=f"Paged {index}")  # the newest last
    page = sign_in(browser, site, user, password)
    # Until the list arrives the sidebar names the page's own new conversation ("New chat").
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-hx=sessions] li')].some((li) => li.textContent.includes('Paged'))"
    )
    listed = page.locator("[data-hx=sessions] li").all_inner_texts()
    assert [text.strip() for text in listed] == ["Paged 4", "Paged 3", "Paged 2"]
    page.context.close()
