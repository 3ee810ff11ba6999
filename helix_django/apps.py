"""App configuration."""

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class HelixConfig(AppConfig):
    """helix_django's AppConfig: registers system checks and signals; runs no queries."""

    name = "helix_django"
    label = "helix_django"
    verbose_name = _("Helix chat generations")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from helix_django import checks, deploy_checks, metrics, signals  # noqa: F401
        from helix_django.recovery.receivers import connect
        from helix_django.streams import purge

        connect()  # telemetry and continuation invalidation receivers; no queries here
        purge.connect()  # a deleted session's stream chunks are purged
        metrics.connect_signals()  # counters fed only while HELIX["METRICS"] is on
