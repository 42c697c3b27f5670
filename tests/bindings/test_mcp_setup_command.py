"""Scripted set-up: `manage.py mcp import FILE --bind W` and `manage.py mcp bind SERVER`.

Idempotent (a second run changes and audits nothing but the import's summary), audited
through the services, and clear about bad files and bad scopes. No server is started:
binding needs no connection.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditEvent
from audit.types import AuditEventType, Decision
from bindings.models import AppBinding, ToolPolicy
from mcp_bridge.models import McpServer
from mcp_bridge.server_config import ConfigFileError, parse_mcp_servers

pytestmark = pytest.mark.django_db


@dataclass
class Output:
    out: str
    err: str


def _last_audit_pk() -> int:
    """Primary keys, not counts: PostgreSQL's sequences do not restart between tests."""
    return AuditEvent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


def mcp(*args: str) -> Output:
    out, err = StringIO(), StringIO()
    call_command("mcp", *args, stdout=out, stderr=err)
    return Output(out.getvalue(), err.getvalue())


def write_config(path: Path, servers: dict[str, Any]) -> str:
    path.write_text(json.dumps({"mcpServers": servers}))
    return str(path)


def events(event_type: AuditEventType) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(event_type=event_type).order_by("pk"))


DESKTOP = {
    "files": {"command": "npx", "args": ["-y", "files-server"], "env": {"TOKEN": "s3cret"}},
    "hosted": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer k"}},
}


def test_import_and_bind_is_idempotent_and_audited(personas, tmp_path: Path) -> None:
    path = write_config(tmp_path / "mcp.json", DESKTOP)
    first = mcp("import", path, "--bind", personas.workspace.slug, "--auto", "search")
    assert first.out.splitlines() == [
        "Added 'files'.",
        "Bound 'files' to workspace 'acme'.",
        "  runs without asking: search",
        "Added 'hosted'.",
        "Bound 'hosted' to workspace 'acme'.",
        "  runs without asking: search",
    ]
    files = McpServer.objects.get(slug="files")
    assert (files.transport, files.command, files.args) == ("stdio", "npx", ["-y", "files-server"])
    binding = AppBinding.objects.get(server=files)
    assert (binding.workspace_id, binding.thread_id, binding.enabled) == (
        personas.workspace.pk,
        None,
        True,
    )
    assert ToolPolicy.objects.get(binding=binding, tool_name="search").approval == "auto"
    added = events(AuditEventType.SERVER_ADDED)
    assert [e.extra["via"] for e in added] == ["import", "import"]
    assert len(events(AuditEventType.BINDING_CREATED)) == 2
    assert len(events(AuditEventType.POLICY_CHANGED)) == 2
    (summary,) = events(AuditEventType.SERVERS_IMPORTED)
    assert summary.extra == {
        "source": "mcp.json",
        "added": ["files", "hosted"],
        "updated": [],
        "unchanged": [],
        "skipped": [],
    }
    # Secrets never reach the audit log: key names only.
    log = json.dumps([e.extra for e in AuditEvent.objects.all()])
    assert "s3cret" not in log and "Bearer k" not in log

    before = _last_audit_pk()
    again = mcp("import", path, "--bind", personas.workspace.slug, "--auto", "search")
    assert again.out.splitlines() == [
        "Unchanged 'files'.",
        "Already bound: 'files' to workspace 'acme'.",
        "Unchanged 'hosted'.",
        "Already bound: 'hosted' to workspace 'acme'.",
    ]
    # The second run records only that it ran.
    new = list(AuditEvent.objects.filter(pk__gt=before).values_list("event_type", flat=True))
    assert new == [AuditEventType.SERVERS_IMPORTED]
    assert McpServer.objects.count() == 2 and AppBinding.objects.count() == 2


def test_import_brings_changed_entries_to_the_file(tmp_path: Path) -> None:
    path = write_config(tmp_path / "mcp.json", DESKTOP)
    mcp("import", path)
    changed = {
        "files": {"url": "https://files.example.com/mcp"},  # now hosted
        "hosted": {**DESKTOP["hosted"], "headers": {"Authorization": "Bearer new"}},
    }
    out = mcp("import", write_config(tmp_path / "mcp.json", changed)).out
    assert out.splitlines() == [
        "Updated 'files' (transport, command, args, env, url).",
        "Updated 'hosted' (headers).",
    ]
    files = McpServer.objects.get(slug="files")
    # What a stdio entry set is cleared when the entry becomes a URL.
    assert (files.transport, files.command, files.args, files.env, files.url) == (
        "streamable_http",
        "",
        [],
        {},
        "https://files.example.com/mcp",
    )
    changes = events(AuditEventType.SERVER_CHANGED)
    assert [c.extra["changed"] for c in changes] == [
        ["transport", "command", "args", "env", "url"],
        ["headers"],
    ]
    assert changes[1].extra["header_keys"] == ["Authorization"]
    assert "Bearer new" not in json.dumps([c.extra for c in changes])


def test_import_refuses_bad_entries_with_reasons_and_audit(personas, tmp_path: Path) -> None:
    path = write_config(
        tmp_path / "mcp.json",
        {
            "Files": {"command": "npx"},
            "files": {"command": "other"},  # the same slug as the entry before
            "!!!": {"command": "npx"},
            "env-value": {"command": "npx", "env": {"A": {"nested": True}}},
            "bad-timeout-free": {"url": "file:///etc/passwd"},
        },
    )
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="4 of 5 entries were skipped"):
        call_command(
            "mcp", "import", path, "--bind", personas.workspace.slug, stdout=out, stderr=err
        )
    assert out.getvalue().splitlines() == ["Added 'Files'.", "Bound 'files' to workspace 'acme'."]
    assert err.getvalue().splitlines() == [
        "Skipped 'files': The entry 'Files' of this file already names the server 'files'.",
        "Skipped '!!!': The server needs a name made of letters or digits.",
        "Skipped 'env-value': 'env' has a value that is not a string.",
        "Skipped 'bad-timeout-free': An HTTP or SSE server needs an http(s) URL.",
    ]
    refused = events(AuditEventType.SERVER_IMPORT_REFUSED)
    assert [(r.decision, r.extra["name"]) for r in refused] == [
        (Decision.DENIED, "files"),
        (Decision.DENIED, "!!!"),
        (Decision.DENIED, "env-value"),
        (Decision.DENIED, "bad-timeout-free"),
    ]
    assert refused[0].reason.startswith("The entry 'Files'")
    assert McpServer.objects.get().command == "npx"  # the duplicate did not overwrite it


def test_import_file_errors_leave_nothing_behind(personas, tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    for content, message in [
        ("{not json", "Cannot read"),
        ("[]", "no 'mcpServers' object"),
        ('{"mcpServers": ["a"]}', "no 'mcpServers' object"),
    ]:
        path.write_text(content)
        with pytest.raises(CommandError, match=message):
            mcp("import", str(path))
    with pytest.raises(CommandError, match="Cannot read"):
        mcp("import", str(tmp_path / "missing.json"))
    write_config(path, DESKTOP)
    # An unknown workspace is refused before anything is imported.
    with pytest.raises(CommandError, match="No workspace with the slug 'nope'"):
        mcp("import", str(path), "--bind", "nope")
    with pytest.raises(CommandError, match="--auto applies with --bind only"):
        mcp("import", str(path), "--auto", "x")
    assert (
        not McpServer.objects.exists()
        and not AuditEvent.objects.filter(
            event_type__in=[AuditEventType.SERVER_ADDED, AuditEventType.SERVERS_IMPORTED]
        ).exists()
    )


def test_bind_workspace_and_thread_idempotently(personas) -> None:
    mcp("add", "board", "--stdio", "python board.py")
    ws = personas.workspace.slug
    assert mcp("bind", "board", "--workspace", ws).out == "Bound 'board' to workspace 'acme'.\n"
    out = mcp("bind", "board", "--workspace", ws, "--thread", str(personas.thread.pk)).out
    assert out == f"Bound 'board' to thread {personas.thread.pk}.\n"
    assert sorted(AppBinding.objects.values_list("thread_id", flat=True), key=str) == sorted(
        [None, personas.thread.pk], key=str
    )

    first = mcp("bind", "board", "--workspace", ws, "--auto", "move_item", "--auto", "add_item")
    assert first.out.splitlines() == [
        "Already bound: 'board' to workspace 'acme'.",
        "  runs without asking: move_item, add_item",
    ]
    binding = AppBinding.objects.get(thread_id=None)
    # A narrower rule set by an admin is kept; only the approval changes.
    ToolPolicy.objects.filter(binding=binding, tool_name="add_item").update(
        risk="write", approval="ask", visibility_override=["app"]
    )
    before = _last_audit_pk()
    second = mcp("bind", "board", "--workspace", ws, "--auto", "move_item", "--auto", "add_item")
    assert second.out.splitlines()[1] == "  runs without asking: add_item"
    policy = ToolPolicy.objects.get(binding=binding, tool_name="add_item")
    assert (policy.risk, policy.approval, policy.visibility_override) == ("write", "auto", ["app"])
    assert list(
        AuditEvent.objects.filter(pk__gt=before).values_list("event_type", "tool_name")
    ) == [(AuditEventType.POLICY_CHANGED, "add_item")]

    before = AuditEvent.objects.count()
    mcp("bind", "board", "--workspace", ws, "--auto", "move_item")
    assert AuditEvent.objects.count() == before  # nothing to do, nothing written


def test_bind_refusals(personas) -> None:
    mcp("add", "board", "--stdio", "python board.py")
    ws = personas.workspace.slug
    with pytest.raises(CommandError, match="No server named 'nope'"):
        mcp("bind", "nope", "--workspace", ws)
    with pytest.raises(CommandError, match="No workspace with the slug 'nope'"):
        mcp("bind", "board", "--workspace", "nope")
    with pytest.raises(CommandError, match="No thread with id 999999"):
        mcp("bind", "board", "--workspace", ws, "--thread", "999999")
    other = str(personas.other_thread.pk)
    with pytest.raises(CommandError, match="That thread belongs to another workspace"):
        mcp("bind", "board", "--workspace", ws, "--thread", other)
    (refused,) = events(AuditEventType.BINDING_REFUSED)
    assert (refused.decision, refused.reason, refused.thread_id, refused.workspace_id) == (
        Decision.DENIED,
        "scope_mismatch",
        personas.other_thread.pk,
        personas.workspace.pk,
    )
    assert not AppBinding.objects.exists()


def test_bind_reports_a_disabled_binding_and_unknown_tools(personas) -> None:
    mcp("add", "board", "--stdio", "python board.py")
    server = McpServer.objects.get()
    mcp("bind", "board", "--workspace", personas.workspace.slug)
    AppBinding.objects.update(enabled=False)
    server.catalogue_refreshed_at = server.created_at  # as if it had listed its tools
    server.save()
    server.tools.create(name="move_item")
    result = mcp("bind", "board", "--workspace", personas.workspace.slug, "--auto", "mvoe_item")
    assert result.out.splitlines()[0] == (
        "Already bound: 'board' to workspace 'acme' (the binding is disabled)."
    )
    assert "has not listed mvoe_item" in result.err


def test_parse_mcp_servers_pure() -> None:
    entries = parse_mcp_servers(
        {
            "mcpServers": {
                "a": {"command": "node", "args": ["x", 1], "env": {"N": 2}},
                "b": {"type": "sse", "url": "https://e.example/sse"},
                "c": {"url": "https://e.example/mcp", "headers": None},
                " ": {"command": "x"},
                "d": {"command": "  "},
            }
        }
    )
    assert [(e.name, e.fields, e.error) for e in entries] == [
        (
            "a",
            {"transport": "stdio", "command": "node", "args": ["x", "1"], "env": {"N": "2"}},
            "",
        ),
        ("b", {"transport": "sse", "url": "https://e.example/sse", "headers": {}}, ""),
        ("c", {"transport": "streamable_http", "url": "https://e.example/mcp", "headers": {}}, ""),
        (" ", None, "The entry has no name."),
        ("d", None, "It has neither a 'command' nor a 'url'."),
    ]
    with pytest.raises(ConfigFileError):
        parse_mcp_servers({"servers": {}})
