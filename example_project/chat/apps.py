"""The example site's chat app: the chat page and the demo-user command."""

from django.apps import AppConfig


class ChatConfig(AppConfig):
    """Example chat page (no models)."""

    name = "example_project.chat"
    label = "example_chat"
    verbose_name = "Example chat"
