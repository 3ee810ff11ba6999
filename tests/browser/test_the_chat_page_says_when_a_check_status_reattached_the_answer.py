"""The chat page's words for a Check status after which the same run goes on (``reattached``, ``recovering``).

The server's Check status of a live run whose provider operation still runs re-attaches it
(``helix_django.recovery.actions``): the page says so plainly, in English and in German,
instead of the fallback "the answer did not finish (reattached)", and counts those outcomes
as ones it follows live. Run with Node against the shipped modules and the German catalog
the page is served.
"""

from __future__ import annotations

import pytest

from helix_django.templatetags.helix_django import js_catalog
from tests.browser.jsrun import run_module

pytestmark = pytest.mark.node

SCRIPT = """
const texts = await import(STATIC + "/chat-texts.js");
const i18n = await import(STATIC + "/i18n.js");
const read = () => Object.fromEntries(INPUT.outcomes.map((o) => [o, [texts.statusCheckText(o), texts.isFollowedOutcome(o)]]));
i18n.setCatalog({ catalog: {} });
const english = read();
i18n.setCatalog(INPUT.german);
console.log(JSON.stringify({ english, german: read() }));
"""


def test_a_reattached_or_followed_answer_is_named_in_english_and_german():
    outcomes = ["reattached", "recovering", "provider_in_progress", "something_new"]
    result = run_module(SCRIPT, {"outcomes": outcomes, "german": js_catalog("de")})
    english, german = result["english"], result["german"]
    assert english["reattached"] == [
        "Checked: the model is still writing this answer. The server picked it up again; "
        "the rest appears here as it is written.",
        True,
    ]
    assert english["recovering"][1] is True and "following it" in english["recovering"][0]
    assert english["provider_in_progress"][1] is False
    assert english["something_new"] == ["Checked: the answer did not finish (something_new).", False]
    assert german["reattached"][0].startswith("Geprüft: Das Modell schreibt diese Antwort noch. Der Server hat sie")
    assert german["recovering"][0].startswith("Geprüft: Das Modell schreibt diese Antwort noch. Der Server verfolgt")
