"""Stream managers by alias: ``get_stream_manager(alias="default")`` (:mod:`.registry`)."""

from __future__ import annotations

from helix_django.streams.registry import (
    InvalidStreamManager,
    StreamManagerHandler,
    get_stream_manager,
    load_stream_manager,
    reset_stream_managers,
    stream_managers,
)

__all__ = [
    "InvalidStreamManager",
    "StreamManagerHandler",
    "get_stream_manager",
    "load_stream_manager",
    "reset_stream_managers",
    "stream_managers",
]
