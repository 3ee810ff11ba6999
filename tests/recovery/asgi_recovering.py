"""The test suite's ASGI app wrapped in RecoveryOnStartup (scan on first call, then every second)."""

from helix_django.recovery.startup import RecoveryOnStartup
from tests.asgi import application as inner

application = RecoveryOnStartup(inner, interval_seconds=1.0)
