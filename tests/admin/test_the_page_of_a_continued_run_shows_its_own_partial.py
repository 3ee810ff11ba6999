"""The run page of an interrupted run that *Continue* took on shows that run's own partial text.

Seen (a new-user check of the sixteenth session): after Continue of a cancelled run, the
original run's page said "Partial output (0 characters)" although its stream had about
365 characters and its ``partial_chars`` counted them. The continuation takes over the
same response row (same message id), so the page's read of "the row this run wrote"
found none. Expected: the page rebuilds the run's part from its own chunks, as it does
for a live run, and its count matches ``Run.partial_chars``.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.contrib.admin.utils import quote
from django.test import Client
from django.urls import reverse

from helix_django.models import Run
from tests.runtime import toolbox
from tests.runtime.conftest import agent, executor, session, use_agents, user_message  # noqa: F401 - fixtures

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


async def test_the_page_of_a_continued_run_shows_its_own_partial(executor, session, use_agents, reconciler):  # noqa: F811
    provider = {
        "BACKEND": f"{toolbox.PATH}.RecordingProvider",
        "OPTIONS": {"TEXT": "one two three four", "DROP_AFTER_CHUNKS": 2},
    }
    use_agents(default={**agent(), "PROVIDER": provider})
    first = await executor.execute(session, [user_message("count", "u-c")])
    assert await executor.wait(first.run_id, 10) == "interrupted"
    use_agents(default={**agent(), "PROVIDER": {**provider, "OPTIONS": {"TEXT": "three four"}}})
    handle = await executor.continue_run(session=session, run_id=first.run_id)
    assert await executor.wait(handle.run_id, 10) == "completed"
    run = await Run.objects.aget(pk=first.run_id)
    assert run.partial_chars == len("one two ")

    def page(run_id: str) -> str:
        client = Client()
        client.force_login(reconciler)
        response = client.get(reverse("admin:helix_django_run_change", args=[quote(run_id)]))
        assert response.status_code == 200
        return response.content.decode()

    original = await sync_to_async(page)(first.run_id)
    assert "Partial output (8 characters)" in original, original[original.find("<h2>") :][:300]
    assert "one two" in original
    continuation = await sync_to_async(page)(handle.run_id)
    assert "Response (" in continuation and "three four" in continuation
