"""helix_django: durable, resumable AI chat generations for Django."""

__version__ = "0.1.0"
