"""App configuration of :mod:`helix_django.contrib.daphne`."""

from __future__ import annotations

from django.apps import AppConfig

from helix_django.contrib.daphne import apply


class HelixDaphneConfig(AppConfig):
    """Applies helix's daphne patches in ``ready()`` where the process runs daphne; defines no models."""

    name = "helix_django.contrib.daphne"
    label = "helix_daphne"
    verbose_name = "Helix under daphne"

    def ready(self) -> None:
        apply()
