"""The database stream manager: chunks in the ``StreamChunk`` table, one transaction per flush.

``HELIX["STREAM_MANAGERS"][alias]["BACKEND"] = "helix_django.streams.database.DatabaseStreamManager"``.
The modules of this package are private:

- ``_manager``: the manager's async API, its reads, and its writes inside a caller's
  transaction (``manager.transactions``);
- ``_writes``: claims, fenced status changes and purges on the ORM's thread;
- ``_append_queue``: appends of one event loop gathered into group commits;
- ``_group_commit``: one transaction for a group of appends (inline on SQLite, else on the ORM's thread);
- ``_inline_sqlite``: the SQLite connection group commits run on, on the event loop.

Recent chunks this process appended are served to live readers without a query from
:mod:`helix_django.streams.tail`.
"""

from helix_django.streams.database._manager import DatabaseStreamManager, DatabaseTransactions

__all__ = ["DatabaseStreamManager", "DatabaseTransactions"]
