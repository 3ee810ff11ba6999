"""The streams package's shape: no import circle, module-level imports, small modules, a narrow base.

Every import counts for a circle, also one under ``TYPE_CHECKING`` or inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import helix_django
from helix_django.streams.base import BaseStreamManager

PACKAGE = Path(helix_django.__file__).parent
STREAMS = PACKAGE / "streams"
#: Optional dependencies a module may import where it uses them.
OPTIONAL = ("redis", "django_redis", "channels_redis")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[str, bool]]:
    """Return ``(imported module or module.name, is inside a function)`` of every import of ``path``."""
    tree = ast.parse(path.read_text())
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                found.extend((alias.name, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module:
                found.append((child.module, in_function))
                found.extend((f"{child.module}.{alias.name}", in_function) for alias in child.names)
            visit(child, inside)

    visit(tree, False)
    return found


def _graph() -> dict[str, set[str]]:
    """Imports between the package's modules (a ``from package import name`` edge goes to the submodule if any)."""
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for imported, _ in _imports(path):
            target = imported
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                graph[name].add(target)
    return graph


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph[node])
    return seen


def test_no_streams_module_is_on_an_import_circle():
    graph = _graph()
    circles = [
        (name, imported)
        for name in graph
        if name.startswith("helix_django.streams")
        for imported in graph[name]
        if name in _reachable(graph, imported)
    ]
    assert circles == []


def test_settings_never_import_the_streams():
    graph = _graph()
    assert [name for name in _reachable(graph, "helix_django.conf") if name.startswith("helix_django.streams")] == []


def test_streams_imports_sit_at_module_level_but_for_optional_dependencies():
    deferred = [
        (str(path.relative_to(PACKAGE)), module)
        for path in STREAMS.rglob("*.py")
        for module, in_function in _imports(path)
        if in_function and not module.startswith(OPTIONAL)
    ]
    assert deferred == []


def test_no_streams_module_is_over_350_lines():
    long = [(path.name, n) for path in STREAMS.rglob("*.py") if (n := len(path.read_text().splitlines())) > 350]
    assert long == []


def test_joining_a_transaction_is_one_optional_capability_not_base_methods():
    hooks = {
        "joins_transactions_of",
        "claim_in_transaction",
        "append_in_transaction",
        "end_in_transaction",
        "wrote_in_transaction",
        "get_info_in_thread",
        "claimed",
    }
    assert hooks.isdisjoint(dir(BaseStreamManager))
    assert BaseStreamManager.transactions is None
