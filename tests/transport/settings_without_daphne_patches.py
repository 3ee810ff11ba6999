"""The test suite's settings without helix_django.contrib.daphne: a site that has not opted in to the daphne patches."""

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

INSTALLED_APPS = [app for app in INSTALLED_APPS if app != "helix_django.contrib.daphne"]
