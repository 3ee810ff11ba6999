"""URLs of the example site: helix_django's API, its chat page, the site's sign-in page and the admin.

The chat page is the one any site mounts (``helix_django.chat_urls``); it sends visitors to
``LOGIN_URL``, here the site's own page (its template names the demo's credentials).
"""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

urlpatterns = [
    path("helix/api/", include("helix_django.urls")),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("", include("helix_django.chat_urls")),
]
