"""URLs of the "real host": helix's include, then host routes under the same prefix, a versioned API, the chat page."""

from django.contrib import admin
from django.http import JsonResponse
from django.shortcuts import render
from django.urls import include, path
from rest_framework.response import Response
from rest_framework.views import APIView


def host_status(request):
    return JsonResponse({"host": "ok"})


def host_remember(request):
    """A host page that writes to the visitor's session (a signed-cookie session is signed again)."""
    request.session["host_visits"] = request.session.get("host_visits", 0) + 1
    return JsonResponse({"visits": request.session["host_visits"]})


def host_rotate(request):
    """A host page that gives the visitor's session a new key and keeps its data, as ``login()`` does."""
    request.session.cycle_key()
    return JsonResponse({"rotated": True})


class HostReports(APIView):
    """A host DRF view under the host's own versioning and scoped throttle."""

    throttle_scope = "host_reports"

    def get(self, request, version):
        return Response({"version": request.version})


def chat_page(request, session_id):
    context = {
        "session_id": session_id,
        "new_session": True,
        "helix_api_base": "/helix/api",
        "chat_url_template": "/chat/__session__/",
    }
    return render(request, "helix_django/chat.html", context)


urlpatterns = [
    path("admin/", admin.site.urls),
    path("helix/api/", include("helix_django.urls")),
    path("helix/api/host-status/", host_status),
    path("host/remember/", host_remember),
    path("host/rotate/", host_rotate),
    path("api/<str:version>/reports/", HostReports.as_view()),
    path("chat/<str:session_id>/", chat_page),
]
