"""Task board: an MCP App with a three-column board view (`ui://board/app`).

Run over stdio (default), streamable HTTP or SSE:

    python examples/board/server.py
    python examples/board/server.py --http --host 127.0.0.1 --port 8101   # http://127.0.0.1:8101/mcp
    python examples/board/server.py --sse --port 8101                     # http://127.0.0.1:8101/sse

State lives in memory. Set ``BOARD_STATE_FILE=/path/board.json`` to persist it, so the board
survives reconnects and restarts (and is shared by every process pointed at the same file).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from mcp.server.apps import Apps, ResourceCsp
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

APP_URI: Final = "ui://board/app"
APP_HTML_PATH: Final = Path(__file__).with_name("app.html")
DEFAULT_HTTP_PORT: Final = 8101

ColumnId = Literal["todo", "doing", "done"]
COLUMNS: Final[tuple[tuple[ColumnId, str], ...]] = (
    ("todo", "To do"),
    ("doing", "In progress"),
    ("done", "Done"),
)
COLUMN_TITLES: Final[dict[str, str]] = dict(COLUMNS)
ID_PREFIX: Final = "ATR-"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass
class Item:
    id: str
    title: str
    column: ColumnId
    tag: str | None
    created_at: str

    def to_wire(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "column": self.column,
            "tag": self.tag,
            "createdAt": self.created_at,
        }


SEED_ITEMS: Final[list[tuple[str, ColumnId, str]]] = [
    ("Draft the Q3 onboarding checklist", "todo", "docs"),
    ("Rotate staging API keys", "todo", "ops"),
    ("Audit CSP for embedded tool views", "todo", "security"),
    ("Migrate notifications to websockets", "doing", "backend"),
    ("Design empty states for threads", "doing", "design"),
    ("Ship dark mode for the composer", "done", "frontend"),
    ("Set up nightly database backups", "done", "ops"),
]


class BoardError(Exception):
    """A request the board cannot satisfy (unknown id, empty title...): shown to the caller."""


class BoardStore:
    """The board's state: an ordered item list, a version counter and the next id number.

    Tools run on worker threads, so every access holds the lock. With a state file the store
    re-reads it whenever it changed on disk, so several server processes can share one board.
    """

    def __init__(self, state_file: Path | None) -> None:
        self._lock = threading.RLock()
        self._state_file = state_file
        self._loaded_mtime: float | None = None
        self.version = 1
        self._next_number = 101
        self._items: list[Item] = []
        if state_file is not None and state_file.exists():
            try:
                self._load()
            except (OSError, ValueError, KeyError, TypeError) as exc:
                # Refuse to start rather than seed over (and so destroy) the user's board.
                raise SystemExit(
                    f"board: cannot read BOARD_STATE_FILE {state_file}: {exc}"
                ) from exc
        else:
            self._seed()
            self._save()

    # -- persistence -------------------------------------------------------------------------

    def _seed(self) -> None:
        created = _now()
        for title, column, tag in SEED_ITEMS:
            self._items.append(Item(self._new_id(), title, column, tag, created))

    def _load(self) -> None:
        assert self._state_file is not None
        data = json.loads(self._state_file.read_text(encoding="utf-8"))
        self.version = int(data["version"])
        self._next_number = int(data["nextNumber"])
        self._items = [
            Item(
                id=raw["id"],
                title=raw["title"],
                column=raw["column"],
                tag=raw.get("tag"),
                created_at=raw["created_at"],
            )
            for raw in data["items"]
            if raw.get("column") in COLUMN_TITLES
        ]
        self._loaded_mtime = self._state_file.stat().st_mtime

    def _refresh_from_disk(self) -> None:
        if self._state_file is None or not self._state_file.exists():
            return
        if self._state_file.stat().st_mtime != self._loaded_mtime:
            self._load()

    def _save(self) -> None:
        if self._state_file is None:
            return
        payload = {
            "version": self.version,
            "nextNumber": self._next_number,
            "items": [asdict(item) for item in self._items],
        }
        self._state_file.parent.mkdir(parents=True, exist_ok=True)
        # Write-then-rename so a crash never leaves a half-written board behind.
        fd, tmp_name = tempfile.mkstemp(
            dir=self._state_file.parent, prefix=".board-", suffix=".tmp"
        )
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, indent=2)
        os.replace(tmp_name, self._state_file)
        self._loaded_mtime = self._state_file.stat().st_mtime

    def _new_id(self) -> str:
        item_id = f"{ID_PREFIX}{self._next_number}"
        self._next_number += 1
        return item_id

    def _find(self, item_id: str) -> Item:
        for item in self._items:
            if item.id == item_id:
                return item
        known = ", ".join(item.id for item in self._items) or "none"
        raise BoardError(f"No item with id {item_id!r}. Known ids: {known}.")

    def _changed(self) -> None:
        self.version += 1
        self._save()

    # -- reads and writes ------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            self._refresh_from_disk()
            return {
                "title": "Team board",
                "version": self.version,
                "total": len(self._items),
                "columns": [
                    {
                        "id": column_id,
                        "title": title,
                        "items": [i.to_wire() for i in self._items if i.column == column_id],
                    }
                    for column_id, title in COLUMNS
                ],
            }

    def add(self, title: str, column: ColumnId) -> Item:
        clean = " ".join(title.split())
        if not clean:
            raise BoardError("The title is empty.")
        with self._lock:
            self._refresh_from_disk()
            item = Item(self._new_id(), clean, column, None, _now())
            self._items.append(item)
            self._changed()
            return item

    def move(self, item_id: str, to: ColumnId, position: int | None) -> tuple[Item, bool]:
        """Move an item to a column (at `position` within it, else last). Idempotent."""
        with self._lock:
            self._refresh_from_disk()
            item = self._find(item_id)
            before = [(i.id, i.column) for i in self._items]
            self._items.remove(item)
            item.column = to
            siblings = [i for i in self._items if i.column == to]
            if position is None or position >= len(siblings):
                anchor = siblings[-1] if siblings else None
                index = self._items.index(anchor) + 1 if anchor else len(self._items)
            else:
                index = self._items.index(siblings[max(position, 0)])
            self._items.insert(index, item)
            changed = before != [(i.id, i.column) for i in self._items]
            if changed:
                self._changed()
            return item, changed

    def delete(self, item_id: str) -> Item:
        with self._lock:
            self._refresh_from_disk()
            item = self._find(item_id)
            self._items.remove(item)
            self._changed()
            return item


def _state_file_from_env() -> Path | None:
    raw = os.environ.get("BOARD_STATE_FILE", "").strip()
    return Path(raw).expanduser() if raw else None


store = BoardStore(_state_file_from_env())


def board_text(board: dict[str, Any]) -> str:
    """The text fallback the model (and text-only clients) read instead of the view."""
    lines = [f"{board['title']}: {board['total']} items (version {board['version']})."]
    for column in board["columns"]:
        lines.append(f"{column['title']} ({len(column['items'])}):")
        lines.extend(
            f"  - [{item['id']}] {item['title']}" + (f" #{item['tag']}" if item["tag"] else "")
            for item in column["items"]
        )
        if not column["items"]:
            lines.append("  (empty)")
    return "\n".join(lines)


def board_result(summary: str | None = None) -> CallToolResult:
    """Every tool answers with the whole board, so the view can re-render from any result."""
    board = store.snapshot()
    text = board_text(board) if summary is None else f"{summary}\n\n{board_text(board)}"
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=board,
        # Result _meta is for the view only; hosts never forward it to the model.
        _meta={"board/version": board["version"], "board/renderedAt": _now()},
    )


def error_result(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


apps = Apps()
apps.add_html_resource(
    APP_URI,
    APP_HTML_PATH.read_text(encoding="utf-8"),
    name="board-app",
    title="Task board",
    description="Interactive three-column task board.",
    # An empty CSP declaration: the view loads nothing from outside its own document.
    csp=ResourceCsp(),
    prefers_border=True,
)


@apps.tool(
    resource_uri=APP_URI,
    visibility=["model", "app"],
    title="List board items",
    annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
)
def list_items() -> CallToolResult:
    """Show the team's task board: every item in the To do, In progress and Done columns."""
    return board_result()


mcp = MCPServer(
    "board",
    title="Task board",
    version="1.0.0",
    instructions=(
        "A team task board with columns todo, doing and done. Use list_items to show it, "
        "add_item to create a task and delete_item to remove one."
    ),
    extensions=[apps],
)


@mcp.tool(
    title="Add a board item",
    annotations=ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
    ),
    meta={"ui": {"visibility": ["model", "app"]}},
)
def add_item(
    title: Annotated[str, Field(description="Short task title", min_length=1, max_length=200)],
    column: Annotated[ColumnId, Field(description="Column to add the item to")] = "todo",
) -> CallToolResult:
    """Add a task to the board."""
    try:
        item = store.add(title, column)
    except BoardError as exc:
        return error_result(str(exc))
    return board_result(f"Added {item.id} “{item.title}” to {COLUMN_TITLES[column]}.")


@mcp.tool(
    title="Move a board item",
    annotations=ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    ),
    meta={"ui": {"visibility": ["app"]}},
)
def move_item(
    id: Annotated[str, Field(description="Item id, e.g. ATR-101")],
    to: Annotated[ColumnId, Field(description="Destination column")],
    position: Annotated[
        int | None, Field(description="0-based index within the destination column", ge=0)
    ] = None,
) -> CallToolResult:
    """Move an item to another column (used by the board view's drag and drop)."""
    try:
        item, changed = store.move(id, to, position)
    except BoardError as exc:
        return error_result(str(exc))
    verb = "Moved" if changed else "Already in place:"
    return board_result(f"{verb} {item.id} → {COLUMN_TITLES[to]}.")


@mcp.tool(
    title="Refresh the board",
    annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    meta={"ui": {"visibility": ["app"]}},
)
def refresh() -> CallToolResult:
    """Return the current board (used by the view's refresh button)."""
    return board_result()


@mcp.tool(
    title="Delete a board item",
    annotations=ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
    ),
    meta={"ui": {"visibility": ["model", "app"]}},
)
def delete_item(id: Annotated[str, Field(description="Item id, e.g. ATR-101")]) -> CallToolResult:
    """Permanently delete an item from the board."""
    try:
        item = store.delete(id)
    except BoardError as exc:
        return error_result(str(exc))
    return board_result(f"Deleted {item.id} “{item.title}”.")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Task board MCP App server.")
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp")
    transport.add_argument("--sse", action="store_true", help="serve the legacy SSE transport")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP bind address")
    parser.add_argument("--port", type=int, default=DEFAULT_HTTP_PORT, help="HTTP port")
    args = parser.parse_args(argv)
    try:
        if args.http:
            mcp.run("streamable-http", host=args.host, port=args.port)
        elif args.sse:
            mcp.run("sse", host=args.host, port=args.port)
        else:
            mcp.run()
    except KeyboardInterrupt:
        pass  # Ctrl-C: the HTTP server has already shut down cleanly


if __name__ == "__main__":
    main()
