"""Backends the stream-manager contract suite runs against."""

from __future__ import annotations

import pytest

from helix_django.streams import load_stream_manager

BACKENDS = {
    "memory": {"BACKEND": "helix_django.streams.memory.MemoryStreamManager", "OPTIONS": {}},
    "database": {"BACKEND": "helix_django.streams.database.DatabaseStreamManager", "OPTIONS": {}},
}


@pytest.fixture(params=sorted(BACKENDS))
def backend_name(request):
    """Name of the backend under test."""
    return request.param


@pytest.fixture
def manager(backend_name):
    """A fresh stream manager of each backend (the contract module marks django_db(transaction=True))."""
    return load_stream_manager(backend_name, BACKENDS)
