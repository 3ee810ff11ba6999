"""docs/aisdk.md's code is the code the React app test runs (tests/browser/test_aisdk_react_app.py).

The page's ``jsx`` blocks are, in order, tests/browser/aisdk_app/stock_chat.jsx (the AI
SDK recipe against ``<prefix>chat``) and kit_chat.jsx (the kit: the user's whole code for
the full experience, at most 30 lines).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "tests" / "browser" / "aisdk_app"


def jsx_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```jsx\n(.*?)^```$", markdown, flags=re.S | re.M)


def test_docs_code_blocks_are_the_tested_app_components():
    blocks = jsx_blocks((ROOT / "docs" / "aisdk.md").read_text())
    assert blocks == [(APP / "stock_chat.jsx").read_text(), (APP / "kit_chat.jsx").read_text()]


def test_the_kit_snippet_is_at_most_30_lines():
    assert len((APP / "kit_chat.jsx").read_text().splitlines()) <= 30
