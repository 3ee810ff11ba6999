"""``pip install 'helix_django[openai]'`` brings every third-party module the OpenAI provider imports.

The provider imports ``openai`` and ``httpx``; openai 3.x depends on ``httpx2`` rather than
``httpx``, so an extra that lists only ``openai`` leaves a fresh project with
``helix_django.E003 ... (No module named 'httpx')``.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
PROVIDER = ROOT / "helix_django" / "runtime" / "providers" / "openai.py"


def third_party_imports(path: Path) -> set[str]:
    """Top-level modules ``path`` imports at module level, outside the standard library and helix."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return {
        name for name in names if name not in sys.stdlib_module_names and name not in {"helix_django", "__future__"}
    }


def test_the_openai_extra_lists_a_distribution_for_every_module_the_provider_imports():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["openai"]
    listed = {re.split(r"[<>=\[ ;]", requirement)[0].lower() for requirement in extra}
    distributions = packages_distributions()
    imported = third_party_imports(PROVIDER)
    assert "openai" in imported
    for module in sorted(imported):
        assert {name.lower() for name in distributions[module]} & listed, (module, listed)
