"""Host middleware of the kind many sites run: it reads ``request.body`` (a signature check, a body log)."""

from __future__ import annotations

import hashlib


class BodyDigestMiddleware:
    """Read ``request.body`` before the view and answer with its SHA-256 in ``X-Body-Sha256``."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        digest = hashlib.sha256(request.body).hexdigest()
        response = self.get_response(request)
        response["X-Body-Sha256"] = digest
        return response
