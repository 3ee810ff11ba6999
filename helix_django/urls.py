"""URLs of helix_django's DRF endpoints: ``path("helix/api/", include("helix_django.urls"))``.

The chat route (``sessions/<id>/chat``), the raw stream route (``sessions/<id>/stream``)
and the WebSocket are ASGI routes under the same prefix: see
:func:`helix_django.transport.routing.get_asgi_application`.
"""

from helix_django.api.urls import urlpatterns

app_name = "helix_django"

__all__ = ["app_name", "urlpatterns"]
