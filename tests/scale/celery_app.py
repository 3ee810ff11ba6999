"""The Celery app of the scale-out tests' site (web processes and ``celery -A tests.scale.celery_app worker``).

Broker: the test Redis (``HELIX_TEST_REDIS_URL``); default queue ``HELIX_TEST_CELERY_QUEUE``,
so concurrent test runs never take each other's tasks. Django's settings module comes from
the environment (``tests.scale.settings``).
"""

import os

import django
from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.scale.settings")
django.setup()

app = Celery("helix_tests")
app.conf.update(
    broker_url=os.environ.get("HELIX_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"),
    task_default_queue=os.environ.get("HELIX_TEST_CELERY_QUEUE", "helix-tests"),
    task_ignore_result=True,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
    imports=["helix_django.runtime.celery_executor"],
)
