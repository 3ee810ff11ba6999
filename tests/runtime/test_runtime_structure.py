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
