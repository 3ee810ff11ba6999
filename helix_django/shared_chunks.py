"""Stored chunks encoded once at their commit and handed to every reader without decoding.

The database stream manager keeps the chunks it committed last in memory (its tail
cache). A chunk of scalar values is kept as an :class:`EncodedChunk`, which carries the
UI chunk a client is sent for it (:class:`UIChunk`) and that UI chunk's wire JSON, both
made once when the chunk was stored. Each reader gets its own copy of the stored chunk
(:meth:`EncodedChunk.for_reader`: a dict copy instead of a JSON decode); the UI chunk is
shared by every response that sends it and is read-only.
"""

from __future__ import annotations

import json
from typing import Any, NoReturn

#: Compact JSON with UTF-8 kept as is: the text of a UI chunk on the wire (one shared encoder).
encode_ui = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

UNKNOWN: Any = object()
"""The UI chunk of an :class:`EncodedChunk` whose reader changed it: worked out afresh."""


class UIChunk(dict):  # type: ignore[type-arg]
    """A UI chunk with its wire JSON (``json``: :data:`encode_ui` of it), shared by every response; read-only."""

    __slots__ = ("json",)
    json: str

    def _read_only(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("a UI chunk shared by responses is read-only")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _read_only


class EncodedChunk(dict):  # type: ignore[type-arg]
    """A stored chunk of scalar values with ``ui``, its UI chunk (None: an internal chunk, never sent).

    A change to the chunk drops ``ui`` (:data:`UNKNOWN`): it no longer tells what the
    changed chunk sends.
    """

    __slots__ = ("ui",)
    ui: UIChunk | None

    def for_reader(self) -> EncodedChunk:
        """Return a copy for one reader (its own dict, the same UI chunk)."""
        copy = EncodedChunk(self)
        copy.ui = self.ui
        return copy

    def __setitem__(self, key: Any, value: Any) -> None:
        self.ui = UNKNOWN
        super().__setitem__(key, value)

    def __delitem__(self, key: Any) -> None:
        self.ui = UNKNOWN
        super().__delitem__(key)

    def __ior__(self, other: Any) -> EncodedChunk:  # type: ignore[override,misc]
        self.ui = UNKNOWN
        return super().__ior__(other)  # type: ignore[no-any-return]

    def clear(self) -> None:
        self.ui = UNKNOWN
        super().clear()

    def pop(self, *args: Any) -> Any:
        self.ui = UNKNOWN
        return super().pop(*args)

    def popitem(self) -> Any:
        self.ui = UNKNOWN
        return super().popitem()

    def setdefault(self, key: Any, default: Any = None) -> Any:
        self.ui = UNKNOWN
        return super().setdefault(key, default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        self.ui = UNKNOWN
        super().update(*args, **kwargs)
