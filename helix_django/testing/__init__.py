"""What a host needs to test its own agents and tools against helix's wire.

- :class:`ChatClient` sends turns and resumes streams over HTTP; :func:`read_sse` reads any
  SSE answer into an :class:`SSEResult` (events with their sequence ids, chunks, text, the
  typed :class:`WireError`).
- :class:`LiveServer` runs the host's ASGI app under daphne or uvicorn on a free port, on the
  test databases of the test process.
- :func:`scripted_agent` puts an agent on the scripted provider; :class:`FakeOpenAI` is an
  OpenAI-compatible server on loopback with scripted :class:`Reply` objects, for agents on
  the ``openai`` provider.

pytest fixtures (``helix_server``, ``helix_server_factory``, ``helix_chat``, ``fake_openai``)
come from the plugin ``helix_django.testing.pytest_plugin``: ``pytest_plugins =
["helix_django.testing.pytest_plugin"]`` in the host's top-level ``conftest.py``.
Importing this package needs httpx and httpx-sse (the ``testing`` extra), not pytest.
See docs/testing.md.
"""

from helix_django.testing.client import ChatClient, new_session_id, scripted_agent, send_body, user_message
from helix_django.testing.fake_openai import FakeOpenAI
from helix_django.testing.live import SERVERS, LiveServer, LiveServerError, default_server, free_port
from helix_django.testing.openai_script import Reply
from helix_django.testing.sse import Event, SSEResult, WireError, read_sse

__all__ = [
    "SERVERS",
    "ChatClient",
    "Event",
    "FakeOpenAI",
    "LiveServer",
    "LiveServerError",
    "Reply",
    "SSEResult",
    "WireError",
    "default_server",
    "free_port",
    "new_session_id",
    "read_sse",
    "scripted_agent",
    "send_body",
    "user_message",
]
