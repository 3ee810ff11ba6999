"""Multitask: what a send does while another answer of its session is still being written.

The strategy is the agent's (``HELIX["AGENTS"][name]["MULTITASK"]``, default
``reject``) unless the request names one (chat route: header ``X-Helix-Multitask`` or
body field ``multitask``; WebSocket ``send`` frame: ``multitask``):

- ``reject``: the send is refused with 409 ``state_already_running`` and stores nothing.
- ``interrupt``: the live run is stopped as the owner's Stop stops it
  (:func:`~helix_django.runtime.cancels.cancel`, ``cancelled_by: follow_up``; its
  partial answer kept, marked partial), the new run's start records it as the run's
  resolution (``interrupted_by_follow_up``, ``resolved_by``), and the new turn starts at
  once. One live run per session stays the rule (the run-start commit's check).
- ``enqueue``: the message is stored durably and the send answered at once (the chat
  route: ``202`` with the queued message; :mod:`.enqueue`); it starts as a send of its
  own when the live run ends, whatever its ending, with that answer in its context
  (:mod:`.queue_starts`). The snapshot lists waiting messages; their owner may remove one
  before it starts. An edit is never queued (refused as under ``reject``).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy

from helix_django.conf import helix_settings
from helix_django.errors import ValidationError

REJECT = "reject"
INTERRUPT = "interrupt"
ENQUEUE = "enqueue"
#: Every strategy a setting or request may name.
STRATEGIES = (REJECT, INTERRUPT, ENQUEUE)


def parse_multitask(value: Any) -> str | None:
    """Return the strategy a request names, or None when it names none (``None`` or ``""``).

    Raises ValidationError (400, ``cause: "multitask"``, ``allowed``: the strategies) for
    any other value; the value itself is never echoed.
    """
    if value is None or value == "":
        return None
    if value not in STRATEGIES:
        raise ValidationError(gettext_lazy("Unknown multitask strategy"), cause="multitask", allowed=list(STRATEGIES))
    return str(value)


def agent_multitask(agent: str | None) -> str:
    """Return agent ``agent``'s strategy (``HELIX["AGENTS"][agent]["MULTITASK"]``, default ``reject``).

    ``agent``: the session's agent name (None: ``HELIX["DEFAULT_AGENT"]``). Raises
    ImproperlyConfigured for a value not in :data:`STRATEGIES`.
    """
    name = agent or helix_settings.DEFAULT_AGENT
    config = (helix_settings.AGENTS or {}).get(name)
    value = config.get("MULTITASK", REJECT) if isinstance(config, dict) else REJECT
    if value not in STRATEGIES:
        raise ImproperlyConfigured(f"HELIX['AGENTS'][{name!r}]['MULTITASK'] must be one of {list(STRATEGIES)}")
    return str(value)


def strategy(requested: str | None, agent: str | None) -> str:
    """Return the strategy of a send: the one its request names, else its agent's."""
    return requested or agent_multitask(agent)
