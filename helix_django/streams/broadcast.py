"""Cross-process stream wake-ups through the Channels layer.

With the in-memory channel layer (one process) nothing is sent. With a shared layer
(``channels_redis``), every notify is published to the group of the stream, and each
process listens on one channel of its own, added to the groups of the streams its
readers park on, and wakes its local waiters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from helix_django.streams.base import BaseStreamManager


def attach_broadcast(manager: BaseStreamManager) -> None:
    """Give ``manager`` a cross-process broadcaster when the channel layer spans processes."""
    return
