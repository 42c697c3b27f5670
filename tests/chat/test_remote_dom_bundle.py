"""The vendored remote-dom bundle (static/chat/app_views/vendor/remote_dom_bundle.js) is what
tools/remote-dom/build.mjs makes from its sources and the pinned @remote-dom/core and
@quilted/threads in tools/mcp-servers (offline, deterministic): a change to either without a
rebuild fails here."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.live import ROOT

BUILD = ROOT / "tools" / "remote-dom" / "build.mjs"
MODULES = ROOT / "tools" / "mcp-servers" / "node_modules"
BUNDLE = ROOT / "static" / "chat" / "app_views" / "vendor" / "remote_dom_bundle.js"


def test_the_bundle_is_built_from_its_sources_and_pins() -> None:
    if shutil.which("node") is None or not (MODULES / "esbuild").is_dir():
        pytest.skip("run tools/install-mcp-servers.sh (make test does)")
    done = subprocess.run(
        ["node", str(BUILD), "--check"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr + done.stdout


def test_the_bundle_names_the_pinned_versions() -> None:
    package = json.loads((ROOT / "tools" / "mcp-servers" / "package.json").read_text())
    pins = package["devDependencies"]
    text = BUNDLE.read_text()
    first = text.index("export const VERSIONS = ")
    versions = json.loads(text[first + len("export const VERSIONS = ") : text.index(";", first)])
    for name in ("@remote-dom/core", "@quilted/threads", "@preact/signals-core", "esbuild"):
        assert versions[name] == pins[name], name
    assert "</script" not in text.lower()  # inlined into the renderer document
