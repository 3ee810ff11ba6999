"""The one import-string loader of helix's settings (helix_django.conf.import_from_setting)."""

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from helix_django.conf import SettingImportError, import_from_setting
from helix_django.runtime.agents import get_agent
from helix_django.runtime.providers.scripted import ScriptedProvider


def test_a_dotted_path_is_imported_and_an_object_passes_through():
    path = "helix_django.runtime.providers.scripted.ScriptedProvider"
    assert import_from_setting(path, "HELIX['X']") is ScriptedProvider
    assert import_from_setting(ScriptedProvider, "HELIX['X']") is ScriptedProvider


@pytest.mark.parametrize("path", ["myapp.missing.Thing", "helix_django.conf.NoSuchName", "nodots"])
def test_a_path_that_cannot_be_imported_is_improperly_configured_naming_the_setting(path):
    with pytest.raises(SettingImportError) as caught:
        import_from_setting(path, "HELIX['PAGINATION_CLASS']")
    error = caught.value
    assert isinstance(error, ImproperlyConfigured) and isinstance(error, ImportError)
    assert error.setting == "HELIX['PAGINATION_CLASS']" and error.dotted_path == path
    assert "HELIX['PAGINATION_CLASS']" in str(error) and repr(path) in str(error)
    assert error.reason


def test_an_agent_whose_provider_cannot_be_imported_names_the_agents_setting():
    agents = {"support": {"PROVIDER": {"BACKEND": "myapp.providers.Missing"}}}
    with override_settings(HELIX={"AGENTS": agents, "DEFAULT_AGENT": "support"}):
        with pytest.raises(SettingImportError) as caught:
            get_agent()
    assert caught.value.setting == "HELIX['AGENTS']['support']['PROVIDER']['BACKEND']"
