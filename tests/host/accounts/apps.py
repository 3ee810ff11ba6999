"""The host's own user app: a custom user model with email as ``USERNAME_FIELD`` (no ``username``)."""

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "tests.host.accounts"
    label = "accounts"
    default_auto_field = "django.db.models.BigAutoField"
