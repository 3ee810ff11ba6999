"""The runtime's shape: recovery never imports it, its imports sit at module level, its modules stay small."""

from __future__ import annotations

import ast
from pathlib import Path

import helix_django

PACKAGE = Path(helix_django.__file__).parent
#: Optional dependencies a module may import where it uses them.
OPTIONAL = ("openai", "celery", "django_tasks", "django.tasks", "redis", "django_redis", "prometheus_client")


def _imports(path: Path) -> list[tuple[str, bool]]:
    """Return ``(imported module, is inside a function)`` of every import of ``path``."""
    tree = ast.parse(path.read_text())
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                found.extend((alias.name, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module:
                found.append((child.module, in_function))
            visit(child, inside)

    visit(tree, False)
    return found


def test_recovery_never_imports_the_runtime():
    upward = [
        (path.name, module)
        for path in (PACKAGE / "recovery").rglob("*.py")
        for module, _ in _imports(path)
        if module.startswith("helix_django.runtime")
    ]
    assert upward == []


def test_runtime_imports_sit_at_module_level_but_for_optional_dependencies():
    deferred = [
        (str(path.relative_to(PACKAGE)), module)
        for path in (PACKAGE / "runtime").rglob("*.py")
        for module, in_function in _imports(path)
        if in_function and not module.startswith(OPTIONAL)
    ]
    assert deferred == []


def test_no_runtime_module_is_over_350_lines():
    long = [
        (path.name, n)
        for path in (PACKAGE / "runtime").rglob("*.py")
        if (n := len(path.read_text().splitlines())) > 350
    ]
    assert long == []


def test_an_entry_point_enters_the_run_opening_once_per_phase():
    """Sends, restarts and tool results open a run by one call into RunStarts: ``launch`` from the loop,
    or for a plain send ``commit_in_thread`` on the ORM's thread and then ``aopen`` on the loop.
    Key lookups (``requests.akeyed_duplicate``) and retiring a dead run (``retirement.aretire_if_dead``)
    live beside it, so a send's path comes back into the opening room for nothing else."""
    from helix_django.runtime.starts import RunStarts

    public = {name for name in vars(RunStarts) if not name.startswith("_")}
    assert public == {"launch", "commit_in_thread", "aopen"}
    calls = {
        path.name: sorted(set(_calls_on(path, "starts")))
        for path in (PACKAGE / "runtime").glob("*.py")
        if path.name not in ("starts.py", "executor.py")
    }
    assert {name: used for name, used in calls.items() if used} == {
        "restarts.py": ["launch"],
        "sends.py": ["aopen", "commit_in_thread", "launch"],
        "tool_results.py": ["launch"],
    }


def _calls_on(path: Path, name: str) -> list[str]:
    """Return the attributes called on the variable ``name`` in ``path`` (``name.attr(...)``)."""
    return [
        node.func.attr
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == name
    ]
