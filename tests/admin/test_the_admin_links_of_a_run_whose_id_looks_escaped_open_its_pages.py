"""The support console's own links work for every run id.

Django's admin escapes a primary key in its URLs (``admin.utils.quote``: ``_`` -> ``_5F``) and
reads it back with ``unquote``, which turns ``_XX`` into a character for the hex codes of the
characters it escapes. A run id is ``run_<32 hex>`` (ids.new_id), so a run whose hex starts
with 22, 23, 24, 25, 26 or 40 (about 1 run in 43) reads back as another id when a link is
built without ``quote``: ``run_40ff...`` -> ``run@ff...``, a 404 (or, for the change page, a redirect to the admin index saying the run does not exist).

helix builds two such links from the raw pk: the change page URL every recovery action
redirects to after a POST, and the "Back" links of the confirmation and tool resolution
pages (``admin/views.py::_change_url``), and the "Resolve" link of a blocking tool
(``run/change_form.html``: ``{% url 'admin:helix_django_run_resolve_tool' original.pk ... %}``).
Staff then land on "Not Found" right after Mark interrupted, and cannot open the page that
unblocks Continue / Regenerate.
"""

from __future__ import annotations

import re
import uuid

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from helix_django.ids import new_id
from tests.recovery.factories import InFlight

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def escaped_looking_run_ids(monkeypatch):
    """Runs minted from now on get ids whose hex starts with 40 (``_40`` unquotes to ``@``)."""

    def mint(prefix: str) -> str:
        return f"run_40{uuid.uuid4().hex[2:]}" if prefix == "run" else new_id(prefix)

    monkeypatch.setattr("helix_django.store.commits.new_id", mint)


def test_after_a_recovery_action_staff_land_on_the_runs_page(staff_client, escaped_looking_run_ids):
    flight = InFlight("s-escaped-action")
    flight.stream_text("Half an answer")
    flight.expire()
    assert flight.run_id.startswith("run_40")
    # The change page opens from a link quoted as Django's admin quotes a pk, and links the
    # action with the id as displayed.
    change = staff_client.get(reverse("admin:helix_django_run_change", args=[quote(flight.run_id)]))
    assert change.status_code == 200
    action = reverse("admin:helix_django_run_recovery", args=[flight.run_id, "mark_interrupted"])
    assert action in change.content.decode()
    page = staff_client.get(action)
    assert page.status_code == 200
    done = staff_client.post(action)
    assert done.status_code == 302
    assert flight.run.status == "interrupted"
    # today: Django sends staff to the admin index, "generation with ID run@... doesn't exist"
    assert staff_client.get(done["Location"]).status_code == 200, done["Location"]


def test_the_resolve_link_of_a_blocking_tool_opens_its_page(staff_client, escaped_looking_run_ids):
    flight = InFlight("s-escaped-tool")
    flight.stream_text("Half an answer")
    flight.tool("call_1", "create_issue", effect="side_effect", status="unknown")
    flight.expire()
    change = staff_client.get(reverse("admin:helix_django_run_change", args=[quote(flight.run_id)]))
    links = re.findall(r'href="([^"]*/tools/\d+/resolve/)"', change.content.decode())
    assert links, "the change page links the tool's resolution"
    assert staff_client.get(links[0]).status_code == 200, links[0]  # 404 today
