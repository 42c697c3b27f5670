"""The one-way layers: chat -> bindings -> mcp_bridge -> audit, in imports and migrations."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from django.db.migrations.loader import MigrationLoader

ROOT = Path(__file__).resolve().parents[2]
# Highest first: an app may depend on the apps after it, never on the ones before it.
LAYERS = ["chat", "bindings", "mcp_bridge"]


def _checker():
    spec = importlib.util.spec_from_file_location(
        "check_function_imports", ROOT / "scripts" / "check_function_imports.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def app_dependencies() -> dict[str, set[str]]:
    """Which project apps each project app's migrations depend on (from the loader)."""
    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    apps = {*LAYERS, "audit"}
    edges: dict[str, set[str]] = {app: set() for app in apps}
    for (app, _name), node in graph.node_map.items():
        if app not in apps:
            continue
        for parent in node.parents:
            if parent.key[0] in apps and parent.key[0] != app:
                edges[app].add(parent.key[0])
    return edges


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    visiting: list[str] = []
    done: set[str] = set()

    def visit(app: str) -> list[str] | None:
        if app in visiting:
            return visiting[visiting.index(app) :] + [app]
        if app in done:
            return None
        visiting.append(app)
        for dep in sorted(edges.get(app, ())):
            found = visit(dep)
            if found:
                return found
        visiting.pop()
        done.add(app)
        return None

    for app in sorted(edges):
        found = visit(app)
        if found:
            return found
    return None


def test_migrations_form_no_cycle_between_apps():
    edges = app_dependencies()
    assert _cycle(edges) is None, f"migration cycle: {' -> '.join(_cycle(edges))}"


def test_migrations_depend_only_downwards():
    """chat -> bindings -> mcp_bridge; audit (the bottom in code) may name the others'
    rows through its constraint-free foreign keys, and no app's migrations depend on it."""
    edges = app_dependencies()
    for app in LAYERS:
        above = set(LAYERS[: LAYERS.index(app)])
        assert not edges[app] & above, f"{app} migrations depend upwards on {edges[app] & above}"
        assert "audit" not in edges[app], f"{app} migrations depend on audit's"
    assert edges["chat"] >= {"bindings"}  # ToolCall.binding: the allowed direction


def test_the_cycle_finder_can_fail():
    assert _cycle({"chat": {"bindings"}, "bindings": {"chat"}}) == ["bindings", "chat", "bindings"]
    assert _cycle({"chat": {"bindings"}, "bindings": set()}) is None


def test_no_function_level_imports_of_project_modules():
    assert _checker().function_level_imports() == []


def test_the_function_import_check_can_fail(tmp_path):
    package = tmp_path / "chat"
    package.mkdir()
    (package / "sneaky.py").write_text(
        "def f():\n    from . import models\n    import json\n    return models, json\n"
    )
    (package / "apps.py").write_text("class C:\n    def ready(self):\n        from . import x\n")
    assert _checker().function_level_imports(tmp_path) == ["chat/sneaky.py:2: import in f()"]


def test_the_audit_review_knows_every_action_kind():
    """audit (the bottom) lists the policy's action kinds without importing bindings."""
    from audit.types import ACTION_KINDS
    from bindings.policy import ActionKind

    assert set(ACTION_KINDS) == {str(kind) for kind in ActionKind}


@pytest.mark.django_db
def test_audit_event_model_lives_in_audit_and_keeps_its_table():
    from audit.models import AuditEvent

    assert AuditEvent._meta.app_label == "audit"
    assert AuditEvent._meta.db_table == "bindings_auditevent"
