"""URLs of the benchmark site: the app's routes when the transport provides them, and the
site's own authenticated endpoints (:mod:`bench.views`, the second baseline of the HTTP sections), and
django-eventstream's view when it is installed (the peer route, :mod:`bench.peers`)."""

from django.conf import settings
from django.urls import include, path

from bench import views
from bench.peers import EVENTS_PATH

urlpatterns = [
    path("bench/authenticated/ping", views.Ping.as_view()),
    path("bench/authenticated/sse", views.Sse.as_view()),
]
try:
    import helix_django.urls  # noqa: F401

    urlpatterns.append(path("helix/api/", include("helix_django.urls")))
except ImportError:  # the API part has not landed: the HTTP sections report "not available"
    pass
if "django_eventstream" in settings.INSTALLED_APPS:  # the peer route (bench.peers)
    urlpatterns.append(path(EVENTS_PATH.strip("/") + "/", include("django_eventstream.urls")))
