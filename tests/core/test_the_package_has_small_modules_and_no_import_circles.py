"""The package's shape (docs/internals.md): small modules, and imports that run one way.

- every Python module of ``helix_django`` and every JavaScript module of its own static
  files (vendored libraries aside) is at most 350 lines;
- no two of the package's parts import each other, directly or around a longer circle
  (a part: a sub-package such as ``runtime`` or ``streams``, or a top-level module such as
  ``usage``), imports inside functions included.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "helix_django"
MAX_LINES = 350


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def part_of(module: str) -> str | None:
    """``helix_django.runtime.agent`` -> ``runtime``; ``helix_django.usage`` -> ``usage``; None outside."""
    names = module.split(".")
    if names[0] != "helix_django" or len(names) < 2:
        return None
    return names[1]


def imported_modules(path: Path) -> set[str]:
    """Every ``helix_django...`` module ``path`` imports, wherever the import statement stands."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.startswith("helix_django")}


def part_graph() -> dict[str, set[str]]:
    """``{part: parts it imports}`` over every module of the package (migrations aside)."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        source = part_of(".".join(relative.parts))
        if source is None or source == "__init__":
            continue
        for module in imported_modules(path):
            target = part_of(module)
            if target in (None, source, "__init__"):
                continue
            if (PACKAGE / target).is_dir() or (PACKAGE / f"{target}.py").exists():
                graph.setdefault(source, set()).add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one part (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_no_module_of_the_package_is_over_350_lines():
    python = [p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts]
    scripts = [p for p in (PACKAGE / "static").rglob("*.js") if "vendor" not in p.parts]
    assert len(python) > 100 and len(scripts) > 10
    over = {str(p.relative_to(PACKAGE)): lines(p) for p in python + scripts if lines(p) > MAX_LINES}
    assert over == {}


def test_no_two_parts_of_the_package_import_each_other():
    graph = part_graph()
    assert {"runtime", "streams", "transport", "store", "recovery"} <= set(graph)
    assert circles(graph) == []


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
