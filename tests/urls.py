"""URLs for the test suite."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("helix/api/", include("helix_django.urls")),
]
