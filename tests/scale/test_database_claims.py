"""Database stream manager claims racing across processes (two connections, two transactions)."""

from __future__ import annotations

import threading
import time

import pytest
from asgiref.sync import async_to_sync
from django.db import connection, transaction

from helix_django.errors import StreamFenceError
from helix_django.streams.database import DatabaseStreamManager

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_first_claims_of_a_new_stream_racing_are_a_compare_and_set():
    manager = DatabaseStreamManager("default", {})
    claimed, release = threading.Event(), threading.Event()
    outcome: dict = {}

    def newer() -> None:  # a run-start in another process: its claim is not committed yet
        try:
            with transaction.atomic():
                manager._claim_sync("s1", "run_new", 5)
                claimed.set()
                release.wait(15)
        finally:
            connection.close()

    def older() -> None:
        try:
            async_to_sync(manager.claim_stream)("s1", "run_old", epoch=1)
            outcome["result"] = "claimed"
        except Exception as exc:
            outcome["result"] = exc
        finally:
            connection.close()

    first = threading.Thread(target=newer)
    first.start()
    assert claimed.wait(15)
    second = threading.Thread(target=older)
    second.start()
    time.sleep(0.5)  # the older claim now waits on the newer one's row (or write lock)
    release.set()
    first.join(15)
    second.join(15)
    assert isinstance(outcome["result"], StreamFenceError), outcome
    info = async_to_sync(manager.get_info)("s1")
    assert (info.run_id, info.epoch, info.status) == ("run_new", 5, "active")
