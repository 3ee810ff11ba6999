"""The example site's chat app: the chat page and the demo-user command."""

from django.apps import AppConfig


class ChatConfig(AppConfig):
    """The demo-user command (no models; the chat page is helix_django.chat_urls)."""

    name = "example_project.chat"
    label = "example_chat"
    verbose_name = "Example chat"
