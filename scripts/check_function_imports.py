"""Fail on an import of a project module inside a function (`make test` runs this).

Such an import usually hides a cycle between modules; fix the cycle instead. The one
exception is ``AppConfig.ready`` (Django's documented place to connect receivers and
register checks, which cannot be imported before the app registry is ready).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (
    "audit",
    "audit_review",
    "bindings",
    "chat",
    "mcp_bridge",
    "config",
    "examples",
    "lean_rows",
)


def _is_project(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] in PACKAGES
    return any(alias.name.split(".")[0] in PACKAGES for alias in node.names)


def function_level_imports(root: Path = ROOT) -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                if node.name == "ready" and path.name == "apps.py":
                    continue
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Import | ast.ImportFrom) and _is_project(inner):
                        where = path.relative_to(root)
                        found.append(f"{where}:{inner.lineno}: import in {node.name}()")
    return sorted(set(found))


def main() -> int:
    found = function_level_imports()
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} function-level import(s) of project modules: fix the cycle.")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
