"""The helix_django admin: sessions, generations (runs) with recovery actions, and read-only records.

Support staff find stuck or interrupted generations (the **Stuck** filter) and reconcile
them with actions that say what will happen; every action needs the custom
``helix_django.reconcile_run`` permission and is recorded in the admin history.
"""

from helix_django.admin import records, runs, sessions  # noqa: F401 - registers the ModelAdmins
