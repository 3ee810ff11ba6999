"""The kit a React app installs from its packed tarball carries TypeScript declarations ``tsc`` holds apps to.

The app of tests/browser/react_app.py (ai@6 line) installs ``helix-ai-sdk`` from the
tarball ``npm pack`` makes, with TypeScript. A TypeScript component that uses the hook, the
transport and every recovery helper as documented passes ``tsc --noEmit`` (strict, the
kit's own declarations checked too); one that hands the hook a wrong option type fails it,
naming that option; and the tarball ships the declarations and nothing outside ``files``.
"""

from __future__ import annotations

import json
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.browser.jsrun import STATIC
from tests.browser.react_app import build_app

pytestmark = [pytest.mark.node, pytest.mark.slow]

TSCONFIG = {
    "compilerOptions": {
        "target": "ES2022",
        "module": "ESNext",
        "moduleResolution": "bundler",
        "jsx": "react-jsx",
        "strict": True,
        "noEmit": True,
        "skipLibCheck": False,
        "types": ["node"],
    },
}

GOOD = """
import { useMemo } from "react";
import { fetchSnapshot, type HelixSnapshot, type RecoveryResult } from "helix-ai-sdk";
import { helixTransport, snapshotResumeOptions, useHelixChat } from "helix-ai-sdk/react";
import { HelixChat } from "helix-ai-sdk/client";

export function Chat({ sessionId, snapshot }: { sessionId: string; snapshot: HelixSnapshot | null }) {
  const target = useMemo(() => (snapshot ? snapshotResumeOptions(snapshot) : { resume: false, messages: [] }), [snapshot]);
  const transport = useMemo(() => helixTransport({ sessionId, target }), [sessionId, target]);
  const chat = useHelixChat({ id: sessionId, transport, messages: [], resume: target.resume, resync: {} });
  const act = async (): Promise<RecoveryResult | null> => {
    const inventory = await chat.recovery();
    if (inventory?.actions.continue.available) return chat.continueRun();
    if (inventory?.actions.keep.available) return chat.keep(inventory.runId);
    return (await chat.checkStatus()) ?? (await chat.discard()) ?? chat.regenerateRun();
  };
  return (
    <div>
      {chat.messages.map((m) => <p key={m.id}>{m.role}</p>)}
      <span>{chat.helixError?.code ?? chat.status}</span>
      <button onClick={() => void chat.sendMessage({ text: "hi" })}>Send</button>
      <button onClick={() => void chat.stop()}>Stop</button>
      <button onClick={() => void chat.retry()}>Retry</button>
      <button onClick={() => void act()}>Recover</button>
    </div>
  );
}

export async function plain(sessionId: string): Promise<string> {
  const snapshot = await fetchSnapshot(`/helix/api/sessions/${sessionId}/snapshot`);
  const client = new HelixChat({ sessionId });
  await client.load();
  return `${snapshot?.status} ${client.view().status}`;
}
"""

BAD = """
import { helixTransport, useHelixChat } from "helix-ai-sdk/react";

export function Chat() {
  const transport = helixTransport({ sessionId: "chat_1" });
  const chat = useHelixChat({ id: "chat_1", transport, resume: "yes" });
  return <p>{chat.status}</p>;
}
"""


@pytest.fixture(scope="module")
def app_root() -> Path:
    """The ai@6 app's folder, the kit installed from its tarball."""
    return build_app("ai6").parent


def tsc(root: Path, name: str, source: str) -> subprocess.CompletedProcess:
    project = root / f"tscheck-{name}"
    project.mkdir(exist_ok=True)
    (project / "component.tsx").write_text(source)
    (project / "tsconfig.json").write_text(json.dumps({**TSCONFIG, "files": ["component.tsx"]}))
    return subprocess.run(  # noqa: S603 - fixed argv
        ["node", str(root / "node_modules" / "typescript" / "bin" / "tsc"), "-p", str(project)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_component_using_the_kit_as_documented_passes_tsc(app_root):
    done = tsc(app_root, "good", GOOD)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_wrong_option_type_for_the_hook_fails_tsc(app_root):
    done = tsc(app_root, "bad", BAD)
    assert done.returncode != 0
    assert "component.tsx(6," in done.stdout and "error TS2322" in done.stdout, done.stdout


def test_the_tarball_ships_the_declarations_and_only_the_files_listed(app_root):
    (tarball,) = (app_root / "pack").glob("helix-ai-sdk-*.tgz")
    with tarfile.open(tarball) as packed:
        names = {name.removeprefix("package/") for name in packed.getnames()}
    manifest = json.loads((STATIC / "package.json").read_text())
    assert names == {*manifest["files"], "package.json"}
    for entry in manifest["exports"].values():
        if isinstance(entry, dict):
            assert {entry["types"][2:], entry["default"][2:]} <= names
    imported = set()
    for module in names:
        if module.endswith(".js"):
            imported |= {f"{m}.js" for m in _relative_imports((STATIC / module).read_text())}
    assert imported <= names, imported - names


def _relative_imports(source: str) -> set[str]:
    return set(re.findall(r'from "\./([\w-]+)\.js"', source))
