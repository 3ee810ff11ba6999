"""Keep daphne from writing body bytes HTTP forbids: after a ``HEAD``'s headers, or a 204's or 304's.

Daphne writes each ASGI ``http.response.body`` message with
``twisted.web.http.Request.write(self, body)``, the class's method. Twisted's own guard for
a response without a body replaces the *instance's* ``write`` with a no-op once the headers
are out, so it drops only the first body message; every later one is written to the
socket. Django sends a body in 64 KiB messages, so a ``HEAD`` of a 200 KB snapshot got its
headers and then the last 136 KB of the conversation, which the client, or a proxy's pooled
upstream connection, reads as the start of the next response on that connection. Here
daphne's request empties the body of every such message; ``more_body`` is kept, so the
response still ends when the application ends it.

Like :mod:`.forms`, applied by :func:`helix_django.contrib.daphne.apply` (the app's ``ready()``)
only in a process that runs daphne (``daphne.server`` imported), to every ASGI application
daphne serves there, the host's own views included.
"""

from __future__ import annotations

import functools
from typing import Any

from helix_django.contrib.daphne.forms import daphne_web_request

#: Statuses whose responses carry no body (RFC 9110: 1xx, 204, 304), as Twisted's ``NO_BODY_CODES``.
NO_BODY_STATUSES = frozenset({204, 304})


def _carries_no_body(request: Any) -> bool:
    return request.method == b"HEAD" or request.code in NO_BODY_STATUSES or 100 <= request.code < 200


def drop_bodies_http_forbids() -> bool:
    """Make daphne write no body bytes for a ``HEAD`` or a 1xx/204/304; return whether daphne is patched.

    Idempotent. Returns False, importing nothing, where this process does not run daphne
    (``daphne.server`` not imported) or daphne is absent.
    """
    request_class: Any = daphne_web_request()  # daphne's class, patched in place
    if request_class is None:
        return False
    if getattr(request_class, "helix_drops_forbidden_bodies", False):
        return True
    original = request_class.handle_reply

    @functools.wraps(original)
    def handle_reply(self: Any, message: dict[str, Any]) -> Any:
        if message.get("type") == "http.response.body" and message.get("body") and _carries_no_body(self):
            message = {**message, "body": b""}
        return original(self, message)

    request_class.handle_reply = handle_reply
    request_class.helix_drops_forbidden_bodies = True
    return True
