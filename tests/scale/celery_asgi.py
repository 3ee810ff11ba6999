"""The test site's ASGI app with the Celery app loaded (as a site's ``__init__.py`` loads its own)."""

from tests.asgi import application  # noqa: F401
from tests.scale.celery_app import app  # noqa: F401
