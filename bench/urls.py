"""URLs of the benchmark site: the app's routes when the transport provides them."""

from django.urls import include, path

try:
    import helix_django.urls  # noqa: F401

    urlpatterns = [path("helix/api/", include("helix_django.urls"))]
except ImportError:  # the API part has not landed: the HTTP sections report "not available"
    urlpatterns = []
