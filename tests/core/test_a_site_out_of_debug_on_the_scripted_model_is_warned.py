"""A site out of ``DEBUG`` whose agents answer with the scripted provider gets W007.

A new project that never configured ``HELIX["AGENTS"]`` answers with the scripted model
(the default agent): fine while developing, a silent fake in production.
"""

from __future__ import annotations

from django.core import checks
from django.test import override_settings

from helix_django.checks import check_scripted_provider

SCRIPTED = {"BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider"}
OPENAI = {"BACKEND": "helix_django.runtime.providers.openai.OpenAIProvider", "OPTIONS": {"API_KEY": "sk-test"}}


def ids(messages):
    return [m.id for m in messages]


def test_the_default_agent_out_of_debug_is_warned_and_named():
    with override_settings(DEBUG=False, HELIX={}):
        messages = check_scripted_provider()
    assert ids(messages) == ["helix_django.W007"]
    assert "'default'" in messages[0].msg and "OpenAIProvider" in messages[0].hint


def test_manage_py_check_runs_it():
    with override_settings(DEBUG=False, HELIX={}):
        assert "helix_django.W007" in ids(checks.run_checks())


def test_each_scripted_agent_is_named_and_a_real_provider_is_quiet():
    helix = {"AGENTS": {"default": {"PROVIDER": OPENAI}, "demo": {"PROVIDER": SCRIPTED}}}
    with override_settings(DEBUG=False, HELIX=helix):
        messages = check_scripted_provider()
    assert ids(messages) == ["helix_django.W007"] and "'demo'" in messages[0].msg
    with override_settings(DEBUG=False, HELIX={"AGENTS": {"default": {"PROVIDER": OPENAI}}}):
        assert check_scripted_provider() == []


def test_a_site_in_debug_is_quiet():
    with override_settings(DEBUG=True, HELIX={}):
        assert check_scripted_provider() == []
