"""Fixtures of the translation tests."""

from __future__ import annotations

import pytest
from django.utils import translation


@pytest.fixture(autouse=True)
def _no_language_left_active():
    """Deactivate the language a request activated: LocaleMiddleware leaves it on the thread.

    Without this a German request here would make the next tests of the process German.
    """
    yield
    translation.deactivate()
