"""Create the demo user of the example site and print its credentials once."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    """``manage.py demo_user``: create ``demo`` with a random password.

    The user is staff with helix_django's permissions, so the admin is reachable from the page.

    The password is printed only when the user is created; a second run says the user
    exists and prints nothing secret (the password is stored only as Django's hash);
    ``--reset`` sets and prints a new one.
    """

    help = "Create the demo user (staff) and print its credentials once."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default="demo")
        parser.add_argument("--reset", action="store_true", help="Set and print a new password.")
        parser.add_argument("--dry-run", action="store_true", help="Report what would happen; change nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        username = options["username"]
        if not username:
            raise CommandError("--username must not be empty")
        user_model = get_user_model()
        user = user_model.objects.filter(username=username).first()
        if user is not None and not options["reset"]:
            self.stdout.write(f"Demo user {username!r} exists (use --reset to set a new password).")
            return
        if options["dry_run"]:
            self.stdout.write(f"Would {'reset' if user else 'create'} demo user {username!r}.")
            return
        password = secrets.token_urlsafe(12)
        if user is None:
            user = user_model.objects.create_user(username=username, password=password, is_staff=True)
            # Support staff's view of the generations in the admin: helix_django's permissions only.
            user.user_permissions.set(Permission.objects.filter(content_type__app_label="helix_django"))
        else:
            user.set_password(password)
            user.save(update_fields=["password"])
        self.stdout.write(self.style.SUCCESS("Demo user ready. Sign in with:"))
        self.stdout.write(f"  username: {username}")
        self.stdout.write(f"  password: {password}")
