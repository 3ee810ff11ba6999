"""The site's own authenticated endpoints: the second baseline of the HTTP sections.

A bare ASGI route (:mod:`bench.asgi`) authenticates nobody and runs no Django; helix's
routes run the site's middleware and its DRF authentication before anything of their own.
These two DRF views are what any authenticated endpoint of the same site costs: Django's
ASGI handler, the site's middleware (``bench.settings.MIDDLEWARE``) and the same
authentication classes as helix's routes (:func:`helix_django.access.policy.authentication_classes`,
here DRF's token authentication), with ``IsAuthenticated``. Their responses are as small as
the bare routes': ``ping`` answers ``ok`` to a POST, ``sse`` streams timestamped frames at
a pace like ``/bench/sse``. The rows that use them show how much of helix's figure the site's own authenticated
endpoint already takes; the restated targets are ratios to them (bench/sections/e2e.py, opens.py).
"""

from django.http import HttpResponse, StreamingHttpResponse
from rest_framework.permissions import IsAuthenticated
from rest_framework.views import APIView

from bench.frames import paced_deltas
from helix_django.access import policy


class _Authenticated(APIView):
    """A DRF view with helix's authentication classes and ``IsAuthenticated``, no throttle."""

    permission_classes = [IsAuthenticated]
    throttle_classes: list[type] = []

    def get_authenticators(self):
        """The authenticators of helix's routes on this site."""
        return policy.authenticators()


class Ping(_Authenticated):
    """``POST /bench/authenticated/ping``: authenticate, answer ``ok`` (the body is read by Django's handler)."""

    def post(self, request, *args, **kwargs):
        """Answer 200 ``ok``."""
        return HttpResponse(b"ok", content_type="text/plain")


async def _frames(tokens: int, pace: float, spread: bool):
    async for sequence, data in paced_deltas(tokens, pace, spread=spread):
        yield f"id: {sequence}\ndata: {data}\n\n".encode()
    yield b"data: [DONE]\n\n"


class Sse(_Authenticated):
    """``GET /bench/authenticated/sse?tokens=N&pace=TPS[&spread=0]``: authenticate, then stream like ``/bench/sse``."""

    def get(self, request, *args, **kwargs):
        """Stream ``tokens`` timestamped SSE frames at ``pace`` per second, then ``[DONE]``."""
        tokens, pace = int(request.GET.get("tokens", "100")), float(request.GET.get("pace", "50"))
        spread = request.GET.get("spread") != "0"
        response = StreamingHttpResponse(_frames(tokens, pace, spread), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        return response
