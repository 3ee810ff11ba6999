"""The AI SDK kit's own unit tests (tests/browser/kit/*.test.mjs: aisdk.js, i18n.js) under Node's test runner."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.browser.jsrun import node_binary

pytestmark = pytest.mark.node

KIT_TESTS = Path(__file__).resolve().parent / "kit"


def test_kit_unit_tests_pass_under_node_test():
    files = sorted(str(path) for path in KIT_TESTS.glob("*.test.mjs"))
    assert files
    done = subprocess.run(  # noqa: S603 - fixed argv
        [node_binary(), "--test", *files], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "# fail 0" in done.stdout
