"""The recovery campaign reports, per provider kind, how SIGKILLed runs ended and how soon the truth was told.

For each provider kind (ephemeral scripted, scripted DURABLE, the real ``openai`` SDK in
Responses background mode against a paced FakeOpenAI): runs re-attached, runs completed from
the provider, runs ended interrupted, orphans left at the provider (0) and seconds to truth
(median and max) (000, "Recovery on app relaunch"). The table prints with ``pytest -s``;
docs/testing.md holds one run's.
"""

from __future__ import annotations

import pytest

from helix_django.testing import FakeOpenAI
from tests.recovery.kind_campaign import campaign
from tests.recovery.kind_figures import TRUTH_BOUND_SECONDS, report
from tests.recovery.provider_kinds import ephemeral, openai_background, scripted_durable

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(400)]


def test_every_kind_tells_the_truth_of_its_killed_runs_and_leaves_no_orphan():
    with FakeOpenAI() as fake:
        figures = campaign([ephemeral(), scripted_durable(), openai_background(fake)], kills=2, runs_per_kill=2)
    text = report(figures)
    print("\n" + text)
    for kind in figures:
        assert kind.killed >= 2, text  # most runs are in flight at their kill
        assert kind.orphans == 0 and kind.left_streaming == 0, text
        assert len(kind.truth_seconds) == kind.killed and kind.truth_max < TRUTH_BOUND_SECONDS, text
        if kind.durable:
            assert kind.reattached + kind.completed == kind.killed and kind.interrupted == 0, text
        else:
            assert kind.interrupted == kind.typed == kind.killed, text
        assert not kind.notes and kind.is_clean, text
    durable = [kind for kind in figures if kind.durable]
    assert sum(kind.reattached for kind in durable) >= 1, text  # the campaign saw a re-attach
