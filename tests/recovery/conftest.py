"""Fixtures of the recovery tests: the live daphne server and a chat client that reads SSE."""
