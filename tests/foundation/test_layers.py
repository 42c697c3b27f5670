"""The one-way layers: audit_review -> chat -> bindings -> mcp_bridge -> audit, in imports,
migrations and run-time model look-ups."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest
from django.apps import apps as app_registry
from django.db.migrations.loader import MigrationLoader

ROOT = Path(__file__).resolve().parents[2]
# Highest first: an app may depend on the apps after it, never on the ones before it.
LAYERS = ["audit_review", "chat", "bindings", "mcp_bridge"]


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
    """chat -> bindings -> mcp_bridge, and no app's migrations depend on audit's. Audit's
    own depend on no other app but in its history: 0001 moved the model out of bindings
    with foreign keys to chat, bindings and mcp_bridge (0002 made them plain ids)."""
    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    for (app, name), node in graph.node_map.items():
        if app == "audit" and name != "0001_initial":
            others = {parent.key[0] for parent in node.parents} & {*LAYERS, "audit_review"}
            assert not others, f"audit.{name} depends on {others}"
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


# ------------------------------------------------------------------ run-time upward reach
# import-linter sees imports only: Django's app registry (``apps.get_model("chat", …)``)
# or a model label (``"chat.Thread"``) reaches a higher app's models without one.
REGISTRY_LOOKUPS = {"get_model", "get_models", "get_app_config", "get_containing_app_config"}


def _above(app: str) -> set[str]:
    """The apps above ``app``: its code must not reach their models."""
    order = [*LAYERS, "audit"]
    return set(order[: order.index(app)])


def _model_labels(app_labels: set[str]) -> set[str]:
    return {
        model._meta.label_lower
        for model in app_registry.get_models()
        if model._meta.app_label in app_labels
    }


def upward_reaches(source: str, above: set[str]) -> list[tuple[int, str]]:
    """(line, what) of every reach of a model of an app in ``above``, in ``source``."""
    labels = _model_labels(above)
    tree = ast.parse(source)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        first = node.args[0] if node.args else None
        if (
            name in REGISTRY_LOOKUPS
            and isinstance(first, ast.Constant)
            and isinstance(first.value, str)
            and first.value.split(".")[0] in above
        ):
            found.append((node.lineno, f"{name}({first.value!r})"))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.lower() in labels
        ):
            found.append((node.lineno, f"model label {node.value!r}"))
    return sorted(set(found))


def lower_layer_modules() -> list[tuple[Path, set[str]]]:
    """Every module (migrations aside: the migration graph is checked above) of the apps
    below chat, with the apps above it."""
    return [
        (path, _above(app))
        for app in [*LAYERS[1:], "audit"]
        for path in sorted((ROOT / app).rglob("*.py"))
        if "migrations" not in path.relative_to(ROOT).parts
    ]


@pytest.mark.parametrize(
    ("path", "above"),
    lower_layer_modules(),
    ids=lambda v: str(v.relative_to(ROOT)).replace("/", ".") if isinstance(v, Path) else "",
)
def test_no_lower_layer_reaches_a_higher_ones_models_at_run_time(path: Path, above: set[str]):
    found = upward_reaches(path.read_text(), above)
    assert not found, (
        f"{path.relative_to(ROOT)} reaches {', '.join(sorted(above))} through the app "
        "registry or a model label; move that code up (e.g. the admin of bindings' rows "
        "lives in chat/admin_bindings.py): "
        + ", ".join(f"line {line}: {what}" for line, what in found)
    )


def test_the_upward_reach_check_can_fail():
    source = """
from django.apps import apps
from django.db import models

def workspace_model():
    return apps.get_model("chat", "Workspace")

def thread_model():
    return apps.get_model("chat.Thread")

LABEL = "chat.Membership"
FOREIGN = models.ForeignKey("chat.Workspace", on_delete=models.CASCADE)
OWN = apps.get_model("bindings", "AppBinding")
MODULE = "chat.receivers"
"""
    assert [what for _, what in upward_reaches(source, {"chat"})] == [
        "get_model('chat')",
        "get_model('chat.Thread')",
        "model label 'chat.Thread'",
        "model label 'chat.Membership'",
        "model label 'chat.Workspace'",
    ]
    assert upward_reaches(source, {"mcp_bridge"}) == []
