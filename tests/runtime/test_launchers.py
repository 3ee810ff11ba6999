"""The launcher setting: ``HELIX["LAUNCHER"]`` loads a backend; the deprecated ``HELIX["EXECUTOR"]`` maps onto one."""

from __future__ import annotations

import warnings

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from helix_django.checks import _check_launcher
from helix_django.runtime.executor import Executor, LocalExecutor, get_executor
from helix_django.runtime.launchers import load_launcher
from helix_django.runtime.launchers.base import BaseLauncher
from helix_django.runtime.launchers.local import LocalLauncher
from helix_django.runtime.launchers.tasks import TasksLauncher

LOCAL = "helix_django.runtime.launchers.local.LocalLauncher"


def test_the_default_launcher_runs_runs_in_this_process():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        launcher = load_launcher()
    assert type(launcher) is LocalLauncher
    assert (launcher.executes_at_once, launcher.lease_owner_kind, launcher.supports_request_key) == (True, "", True)
    assert launcher.check() == []


def test_the_launcher_setting_loads_its_backend_with_its_options():
    with override_settings(HELIX={"LAUNCHER": {"BACKEND": LOCAL, "OPTIONS": {"name": "x"}}}):
        launcher = load_launcher()
        executor = get_executor()
    assert type(launcher) is LocalLauncher and launcher.options == {"name": "x"}
    assert isinstance(executor, Executor) and type(executor.launcher) is LocalLauncher


@pytest.mark.parametrize(
    ("executor_path", "launcher_class"),
    [
        ("helix_django.runtime.executor.LocalExecutor", LocalLauncher),
        ("helix_django.runtime.tasks_executor.TasksExecutor", TasksLauncher),
    ],
)
def test_the_deprecated_executor_setting_maps_onto_its_launcher_with_a_warning(executor_path, launcher_class):
    with override_settings(HELIX={"EXECUTOR": executor_path}):
        with pytest.warns(DeprecationWarning, match=r"HELIX\['EXECUTOR'\] is deprecated"):
            launcher = load_launcher()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # warned once, when first built
            executor = get_executor()
    assert type(launcher) is launcher_class
    assert type(executor.launcher) is launcher_class
    assert executor.launcher.executes_at_once is (launcher_class is LocalLauncher)


def test_the_launcher_setting_wins_over_the_deprecated_executor_without_a_warning():
    with override_settings(
        HELIX={"EXECUTOR": "helix_django.runtime.tasks_executor.TasksExecutor", "LAUNCHER": {"BACKEND": LOCAL}}
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            assert type(load_launcher()) is LocalLauncher


def test_an_unknown_executor_or_launcher_is_a_configuration_error_and_check_e004():
    with override_settings(HELIX={"EXECUTOR": "nope.Executor"}):
        with pytest.warns(DeprecationWarning), pytest.raises(ImproperlyConfigured):
            load_launcher()
        assert [m.id for m in _check_launcher()] == ["helix_django.E004"]
    with override_settings(HELIX={"LAUNCHER": {"BACKEND": "nope.Launcher"}}):
        with pytest.raises(ImproperlyConfigured):
            load_launcher()
        assert [m.id for m in _check_launcher()] == ["helix_django.E004"]
    with override_settings(HELIX={"LAUNCHER": {"BACKEND": "helix_django.runtime.executor.Executor"}}):
        with pytest.raises(ImproperlyConfigured, match="not a BaseLauncher subclass"):
            load_launcher()


def test_a_queue_launcher_flags_that_workers_execute_its_runs():
    launcher = TasksLauncher()
    assert isinstance(launcher, BaseLauncher)
    assert (launcher.executes_at_once, launcher.lease_owner_kind) == (False, "handoff")
    assert LocalExecutor().launcher.lease_owner_kind == ""
