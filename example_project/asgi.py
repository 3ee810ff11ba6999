"""ASGI entry point of the example site: HTTP and WebSocket through Channels, served by daphne.

    daphne example_project.asgi:application

helix_django's chat and stream routes and its WebSocket are Channels consumers under
``helix/api/`` (where ``urls.py`` mounts ``helix_django.urls``); every other HTTP path goes
to Django.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
# Django must be set up before anything imports models (the routing below does).
django_asgi_app = get_asgi_application()

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from helix_django.recovery.startup import RecoveryOnStartup  # noqa: E402
from helix_django.transport.routing import get_asgi_application as helix_asgi_application  # noqa: E402
from helix_django.tuning import tune_gc_for_streaming  # noqa: E402

# Collector thresholds for many live streams in one process (docs/performance.md):
# CPython's first threshold makes full collections pause every stream under load.
tune_gc_for_streaming()

# daphne serves no static files itself: the example serves the JS client and the CSS with
# Django's static files handler (in production, let nginx serve STATIC_ROOT instead).
# RecoveryOnStartup runs the relaunch scan when the process starts (and every LEASE_SECONDS):
# a run left in flight by a killed server is found and marked interrupted, partial kept.
application = RecoveryOnStartup(helix_asgi_application(ASGIStaticFilesHandler(django_asgi_app), prefix="helix/api/"))
