"""Long base64 literals a stdio server wrote, waiting in spool files for the host to claim.

The stdio transport (``mcp_bridge.stdio_transport``) streams a long string literal of a
tool result's media field (``content[i].data``, ``content[i].resource.blob``) into a file
under its spool directory as the bytes arrive, and puts a *marker* in the message where the
literal was. The host's own normalization (``mcp_bridge.normalize``, given :func:`claim`)
turns a marker back into its :class:`SpooledLiteral` and hands it to staging, which renames
the file into place; the payload never exists in the process as a whole.

Why a marker cannot be forged or replayed: it is :data:`MARKER_PREFIX` plus 128 random bits
drawn here, and means something only while it is in this process's registry. It names no
file (the registry maps it to one), a server never sees it, and :func:`claim` removes it, so
a marker that leaked (say, into a model's reply and back to another server) resolves to
nothing — it is then just a string that is not valid base64.

Files nobody claims (a call cancelled after its result arrived, a failed transaction) are
removed by the staging sweeper (``chat.media.storage.sweep_orphan_staging``); their registry
entries expire after :data:`UNCLAIMED_TTL` seconds.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MARKER_PREFIX",
    "SPOOL_SUBDIR",
    "SPOOL_SUFFIX",
    "UNCLAIMED_TTL",
    "SpooledLiteral",
    "claim",
    "is_marker",
    "register",
]

MARKER_PREFIX = "atrium-spooled:"
SPOOL_SUBDIR = "incoming"  # of MEDIA_STAGING_ROOT: same file system, so staging renames
SPOOL_SUFFIX = ".part"
UNCLAIMED_TTL = 600.0  # seconds; normalization claims a marker right after the call returns
_BASE64_SPACE = b" \t\r\n"


@dataclass(frozen=True, slots=True)
class SpooledLiteral:
    """A JSON string literal's content (ASCII, no escapes) in a file of its own.

    ``length``: characters written; ``spaces``: how many of them are whitespace (skipped by
    base64); ``tail``: its last non-space characters (at most 2), which say the padding.
    """

    path: Path
    length: int
    spaces: int
    tail: bytes

    def decoded_size(self) -> int | None:
        """What the text decodes to, from length and padding (``None``: cannot be base64).
        The alphabet is checked by whoever decodes it."""
        significant = self.length - self.spaces
        if significant % 4:
            return None
        data_tail = self.tail.rstrip(b"=")
        if b"=" in data_tail:
            return None
        return significant // 4 * 3 - (len(self.tail) - len(data_tail))

    def read_text(self) -> str:
        """The whole text (for a literal small enough to decode on the request path, or one
        that turned out not to be media)."""
        return self.path.read_bytes().decode("ascii")

    def discard(self) -> None:
        self.path.unlink(missing_ok=True)


class SpoolWriter:
    """Writes one literal's content to a new spool file, counting what ``SpooledLiteral``
    records. The file is created exclusively under a random name, mode 0600."""

    def __init__(self, spool_dir: Path) -> None:
        spool_dir.mkdir(parents=True, exist_ok=True)
        self.path = spool_dir / f"{secrets.token_hex(16)}{SPOOL_SUFFIX}"
        descriptor = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        self._file = os.fdopen(descriptor, "wb")  # buffered: never a short write
        self._length = 0
        self._spaces = 0
        self._tail = b""

    def write(self, piece: bytes) -> None:
        self._file.write(piece)
        self._length += len(piece)
        if b" " in piece:  # JSON strings hold no raw tabs or line breaks, only spaces
            self._spaces += piece.count(b" ")
        stripped = piece.rstrip(_BASE64_SPACE)
        if stripped:
            self._tail = (self._tail + stripped[-2:])[-2:]

    def read_back(self) -> bytes:
        """What was written (the literal turned out not to be spoolable), and the file goes."""
        self._file.close()
        data = self.path.read_bytes()
        self.path.unlink(missing_ok=True)
        return data

    def finish(self) -> SpooledLiteral:
        self._file.close()
        return SpooledLiteral(self.path, self._length, self._spaces, self._tail)

    def abort(self) -> None:
        self._file.close()
        self.path.unlink(missing_ok=True)


_registry: dict[str, tuple[float, SpooledLiteral]] = {}
_lock = threading.Lock()


def register(literal: SpooledLiteral) -> str:
    """A fresh marker for ``literal``, valid in this process until claimed or expired."""
    marker = f"{MARKER_PREFIX}{secrets.token_hex(16)}"
    now = time.monotonic()
    with _lock:
        for stale in [m for m, (at, _) in _registry.items() if now - at > UNCLAIMED_TTL]:
            del _registry[stale]
        _registry[marker] = (now, literal)
    return marker


def claim(marker: str) -> SpooledLiteral | None:
    """The literal behind a marker this process handed out (once), else ``None``."""
    if not is_marker(marker):
        return None
    with _lock:
        entry = _registry.pop(marker, None)
    return entry[1] if entry is not None else None


def is_marker(value: object) -> bool:
    return isinstance(value, str) and value.startswith(MARKER_PREFIX) and len(value) < 64
