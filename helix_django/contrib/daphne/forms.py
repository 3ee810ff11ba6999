"""Keep daphne's HTTP layer (Twisted) from parsing form bodies itself.

Twisted's ``http.Request`` parses every ``POST`` with an ``application/x-www-form-urlencoded``
or ``multipart/form-data`` body into ``request.args`` before daphne sees the request,
in Python on the event loop: 2.95 s for a 4 MB urlencoded body and 1.1 s for a 1 MB
multipart one measured here, with every stream of the process paused meanwhile; and
a multipart body it cannot parse (no boundary) is answered with an empty 400 that no
application code can type. Daphne never reads ``request.args`` (it hands the raw body
to the ASGI app), so turning the parse off changes nothing else: the app gets every
body and answers it with a typed refusal.

The patch applies only in a process that runs daphne (``daphne.server`` is imported, as
daphne's CLI and its ``runserver`` do before they load the application). Under another
server (uvicorn) importing daphne's HTTP layer would load Twisted for nothing:
116 modules and 6 MiB of RSS measured here.
"""

from __future__ import annotations

import functools
import sys
from typing import Any


def daphne_web_request() -> type | None:
    """Return daphne's ``WebRequest`` class where this process runs daphne; None, importing nothing, elsewhere.

    The class every daphne patch of helix's applies to (this module's, :mod:`.head`'s).
    """
    if "daphne.server" not in sys.modules:
        return None
    try:
        from daphne.http_protocol import WebRequest
    except ImportError:
        return None
    return WebRequest


def disable_twisted_form_parsing() -> bool:
    """Make every daphne ``WebRequest`` skip Twisted's form parsing; return whether daphne is patched.

    Idempotent. Returns False, importing nothing, where this process does not run daphne
    (``daphne.server`` not imported) or daphne (or the Twisted attribute it relies on) is absent.
    """
    request_class: Any = daphne_web_request()  # daphne's class, patched in place
    if request_class is None:
        return False
    if getattr(request_class, "helix_skips_form_parsing", False):
        return True
    original = request_class.__init__

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self._parsePOSTFormSubmission = False  # the flag Twisted reads before parsing a form

    request_class.__init__ = __init__
    request_class.helix_skips_form_parsing = True
    return True
