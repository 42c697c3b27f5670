"""Entry points stay thin: admin, consumers, socket actions, tasks, views, management
commands and signal receivers call services and selectors; they write nothing themselves.

An AST walk over those modules of every app refuses an ORM write (``.save(``,
``.create(``, ``.delete(``, ``bulk_create`` …, ``.update(`` on a query), a row lock, and a
direct call of the audit writer or the thread-event writer (``record``, ``insert_row``,
``update_row``, ``emit``): each belongs in ``<app>/services``, where it is audited in the
same transaction and broadcast on commit.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A write whatever the receiver (no plain Python object of these modules has them).
ALWAYS = {
    "save",
    "create",
    "delete",
    "bulk_create",
    "bulk_update",
    "get_or_create",
    "update_or_create",
    "select_for_update",
    "raw",
}
# ``.update(`` is a write on a query (``X.objects.filter(...).update(...)``); on a plain
# name it is usually a dict (``context.update(...)``).
ON_QUERY = {"update"}
# The writers only services call.
WRITERS = {"record", "insert_row", "update_row", "emit"}
# Default admin writes, reached through super().
SUPER_WRITES = {"save_model", "delete_model", "delete_queryset", "save_related"}

ENTRY_FILES = (
    "admin.py",
    "consumers.py",
    "tasks.py",
    "views.py",
    "receivers.py",
)


def apps() -> list[Path]:
    return sorted(p.parent for p in ROOT.glob("*/apps.py") if p.parent.name != "config")


def entry_modules() -> list[Path]:
    found: list[Path] = []
    for app in apps():
        for path in app.rglob("*.py"):
            relative = path.relative_to(app)
            if relative.parts[0] in ("migrations", "services"):
                continue
            if (
                path.name in ENTRY_FILES
                or path.name.endswith("_views.py")
                or path.name.startswith("admin_")  # chat/admin_bindings.py
                or relative.parts[:2] == ("management", "commands")
                or relative.parts[0] == "actions"  # the socket's action handlers
            ):
                found.append(path)
    return sorted(found)


def _is_query(node: ast.expr) -> bool:
    """``X.objects``, ``X.objects.filter(...)``, ``qs.filter(...).exclude(...)`` …"""
    if isinstance(node, ast.Attribute) and node.attr == "objects":
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)


def writes_in(source: str) -> list[tuple[int, str]]:
    """(line, what) of every write the module makes itself."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in WRITERS:
            found.append((node.lineno, f"{func.id}()"))
        if not isinstance(func, ast.Attribute):
            continue
        if func.attr in WRITERS or func.attr in ALWAYS:
            found.append((node.lineno, f".{func.attr}()"))
        elif func.attr in ON_QUERY and _is_query(func.value):
            found.append((node.lineno, f".{func.attr}() on a query"))
        elif (
            func.attr in SUPER_WRITES
            and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name)
            and func.value.func.id == "super"
        ):
            found.append((node.lineno, f"super().{func.attr}()"))
    return sorted(found)


def test_the_checker_sees_each_kind_of_write():
    source = """
def f(request, obj, qs):
    Thread.objects.create(title="x")
    Thread.objects.filter(pk=1).update(title="y")
    obj.save()
    obj.delete()
    qs.bulk_create([])
    Thread.objects.get_or_create(pk=1)
    Thread.objects.select_for_update().first()
    record(event_type=1)
    events.emit(thread_id=1, kind="x", payload={})
    super().save_model(request, obj, None, False)
    context = {}
    context.update(a=1)
    services.thread_create(workspace=None, title="", actor=None)
"""
    kinds = [what for _, what in writes_in(source)]
    assert kinds == [
        ".create()",
        ".update() on a query",
        ".save()",
        ".delete()",
        ".bulk_create()",
        ".get_or_create()",
        ".select_for_update()",
        "record()",
        ".emit()",
        "super().save_model()",
    ]


def test_entry_modules_are_found():
    names = {str(p.relative_to(ROOT)) for p in entry_modules()}
    assert {
        "chat/realtime/consumers.py",
        "chat/tasks.py",
        "chat/media/tasks.py",
        "chat/media/views.py",
        "chat/receivers.py",
        "chat/admin.py",
        "chat/admin_bindings.py",
        "chat/management/commands/mcp.py",
    } <= names


@pytest.mark.parametrize(
    "path", entry_modules(), ids=lambda p: str(p.relative_to(ROOT)).replace("/", ".")
)
def test_entry_points_only_call_services(path: Path):
    found = writes_in(path.read_text())
    assert not found, (
        f"{path.relative_to(ROOT)} writes itself; move these into <app>/services: "
        + ", ".join(f"line {line}: {what}" for line, what in found)
    )
