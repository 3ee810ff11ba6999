"""DRF classes a host site names in its ``REST_FRAMEWORK`` defaults (used by :mod:`tests.host.profiles`)."""

from __future__ import annotations

from typing import Any

from rest_framework.renderers import JSONRenderer


class EnvelopeRenderer(JSONRenderer):
    """The host's JSON renderer: every answer enveloped as ``{"data": <body>}``."""

    def render(self, data: Any, accepted_media_type: Any = None, renderer_context: Any = None) -> bytes:
        """Return ``{"data": data}`` as JSON."""
        return super().render({"data": data}, accepted_media_type, renderer_context)
