"""Server patches for sites that daphne serves: opt in with ``"helix_django.contrib.daphne"`` in ``INSTALLED_APPS``.

Installing ``helix_django`` patches nothing. A site served by daphne adds this app, and its
``ready()`` calls :func:`apply` once Django's apps are loaded. The patches change daphne's
(and Twisted's) classes in the process, so they apply to every ASGI application daphne
serves there, the host's own views included (docs/deploy.md, "Serving with daphne"):

- Twisted's own form parsing is turned off (:mod:`.forms`);
- ASGI ``send`` waits while a client does not read (:mod:`.backpressure`);
- no body bytes follow the headers of a ``HEAD`` or a 1xx/204/304 (:mod:`.head`).

Under another server (uvicorn, whose ``send`` already waits) :func:`apply` imports nothing of
daphne and changes nothing, so the app is harmless in a settings module shared by both.
"""

from __future__ import annotations

from helix_django.contrib.daphne.backpressure import apply_send_backpressure
from helix_django.contrib.daphne.forms import disable_twisted_form_parsing
from helix_django.contrib.daphne.head import drop_bodies_http_forbids

__all__ = ["apply", "apply_send_backpressure", "disable_twisted_form_parsing", "drop_bodies_http_forbids"]


def apply() -> bool:
    """Apply the three daphne patches where this process runs daphne; return whether it does.

    Idempotent. Returns False, importing nothing of daphne, where ``daphne.server`` is not
    imported (daphne's CLI imports it before it loads the application; its ``runserver``
    through the ``daphne`` app in ``INSTALLED_APPS``). Call it from ``asgi.py`` instead of
    installing the app where the app registry is set up before daphne is imported.
    """
    forms = disable_twisted_form_parsing()
    backpressure = apply_send_backpressure()
    head = drop_bodies_http_forbids()
    return forms and backpressure and head
