"""App configuration."""

from typing import Any

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
        from helix_django.runtime import queue_starts
        from helix_django.streams import purge

        connect()  # telemetry and continuation invalidation receivers; no queries here
        purge.connect()  # a deleted session's stream chunks are purged
        metrics.connect_signals()  # counters fed only while HELIX["METRICS"] is on
        queue_starts.connect(self.run_executor)  # a run's ending starts its session's next queued message

    def run_executor(self) -> Any:
        """Return the runtime's executor (``get_executor()``), for the floors below it that must not import it.

        :class:`~helix_django.recovery.startup.RecoveryOnStartup` re-attaches runs with it.
        """
        from helix_django.runtime.executor import get_executor  # the top floor reaches down, after app loading

        return get_executor()
