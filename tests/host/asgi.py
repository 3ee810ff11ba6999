"""ASGI application of the "real host" profile, wired as the README's install section says."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.host.settings")

from django.core.asgi import get_asgi_application as django_asgi_application  # noqa: E402

django_app = django_asgi_application()

from helix_django.transport.routing import get_asgi_application  # noqa: E402

application = get_asgi_application(django_app, prefix="helix/api/")
