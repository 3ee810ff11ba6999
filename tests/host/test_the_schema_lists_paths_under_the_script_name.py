"""Under ``FORCE_SCRIPT_NAME`` the OpenAPI schema lists helix's paths as a client calls them.

A host mounted under ``FORCE_SCRIPT_NAME = "/app"`` (its proxy strips ``/app``) served a
schema whose paths lacked ``/app``: a generated client called URLs the proxy does not route.
"""

from __future__ import annotations

import pytest

from tests.host.sites import PREFIX

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_schemas_paths_carry_the_script_name(host_site):
    site = host_site("force_script_name")
    answer = site.request("GET", f"{PREFIX}/schema/?format=json", "alice")
    assert answer.status_code == 200, answer.text
    paths = list(answer.json()["paths"])
    assert "/app/helix/api/sessions/" in paths, paths
    assert "/app/helix/api/sessions/{session_id}/snapshot" in paths, paths
    assert all(p.startswith("/app/helix/api/") for p in paths), paths
