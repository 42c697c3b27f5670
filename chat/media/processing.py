"""The worker's work on one staged file, apart from Django: decode, hash, verify, derive.

A base64 staging file is decoded strictly in one streaming pass (hashing as it goes), so
the worker holds a chunk of it at a time and the decoded copy lives on disk; the bytes are
then held to their declared type (``chat.media.formats``), images checked and thumbnailed
(``chat.media.images``), containers read for hints, and everything handed to a ``store``
callback (content-addressed names). Raises ``MediaRejected`` with a reason for people.
"""

from __future__ import annotations

import binascii
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .documents import is_text_type, read_pdf, read_text_file
from .formats import (
    HEAD_BYTES,
    MediaHints,
    MediaRejected,
    VerifiedType,
    check_declared_type,
    container_hints,
    read_at,
)
from .images import (
    POSTER_MAX,
    THUMBNAIL_MAX,
    Derivative,
    encode_derivative,
    inspect_image,
    video_stills,
)
from .video import video_first_frame

HASH_CHUNK = 1024 * 1024
BASE64_CHUNK = 4 * 1024 * 1024  # characters of a base64 staging file read at a time
MAX_VIDEO_FRAME = 16 * 1024 * 1024  # a poster frame larger than this is not decoded
ENCODED_SUFFIX = ".b64"  # a staging file holding base64 text (chat.media.staging)
DECODED_SUFFIX = ".decoded"  # where the worker decodes one to (never a staging key)
_BASE64_SPACE = b" \t\n\r"  # what the request path's size count skips, too
INVALID_BASE64 = "The media's data is not valid base64, so it was not stored."


@dataclass
class StagedFile:
    path: Path
    sha256: str
    size: int
    head: bytes


def decode_base64_file(source: Path, target: Path, *, expected_size: int | None) -> StagedFile:
    """Decode a base64 staging file into ``target`` in one streaming pass, hashing as it
    goes (sha256, size, the first bytes). Strict: the standard alphabet, padding only at
    the very end; spaces, tabs and line breaks are skipped (what the request path's size
    count skips). Raises MediaRejected for invalid base64, and for a result that is not
    ``expected_size`` bytes (a staging file cut short, e.g. by a power loss)."""
    digest = hashlib.sha256()
    size = 0
    head = b""
    carry = b""
    padded = False
    with open(source, "rb") as encoded, open(target, "wb") as out:
        while chunk := encoded.read(BASE64_CHUNK):
            chunk = chunk.translate(None, _BASE64_SPACE)
            if not chunk:
                continue
            if padded:  # data after the padding
                raise MediaRejected(INVALID_BASE64)
            if carry:
                chunk = carry + chunk
            usable = len(chunk) - len(chunk) % 4
            carry = chunk[usable:]
            if not usable:
                continue
            block = memoryview(chunk)[:usable]
            padded = block[-1] == ord("=")
            try:
                data = binascii.a2b_base64(block, strict_mode=True)
            except binascii.Error:
                raise MediaRejected(INVALID_BASE64) from None
            finally:
                block.release()
            if size < HEAD_BYTES:
                head = (head + data[:HEAD_BYTES])[:HEAD_BYTES]
            digest.update(data)
            out.write(data)
            size += len(data)
    if carry:  # not a multiple of 4 characters
        raise MediaRejected(INVALID_BASE64)
    if expected_size is not None and size != expected_size:
        raise MediaRejected(
            f"The staged media is incomplete ({size} of {expected_size} bytes), so it was "
            "not stored."
        )
    return StagedFile(path=target, sha256=digest.hexdigest(), size=size, head=head)


def hash_file(path: Path) -> StagedFile:
    """sha256 and size in one streaming pass, keeping only the first bytes."""
    digest = hashlib.sha256()
    size = 0
    head = b""
    with open(path, "rb") as handle:
        while chunk := handle.read(HASH_CHUNK):
            if size == 0:
                head = chunk[:HEAD_BYTES]
            digest.update(chunk)
            size += len(chunk)
    return StagedFile(path=path, sha256=digest.hexdigest(), size=size, head=head)


def too_large_reason(size: int, max_bytes: int) -> str:
    return (
        f"The file ({size // (1024 * 1024)} MB) is larger than the "
        f"{max_bytes // (1024 * 1024)} MB limit."
    )


def content_name(sha256: str, suffix: str = "") -> str:
    """Where content with this digest lives in the default storage."""
    return f"sha256/{sha256[:2]}/{sha256[2:4]}/{sha256}{suffix}"


@dataclass
class ProcessedMedia:
    """What the worker learned and stored; nothing here touches the database."""

    sha256: str
    size: int
    mime: str
    kind: str
    storage_path: str
    thumbnail_path: str = ""
    poster_path: str = ""
    width: int | None = None
    height: int | None = None
    duration: float | None = None
    text_path: str = ""
    text_truncated: bool = False
    pages: int | None = None


@dataclass
class Derived:
    hints: MediaHints
    thumbnail: Derivative | None = None
    poster: Derivative | None = None
    text: str | None = None  # what a model reads of a document (chat.media.documents)
    text_truncated: bool = False
    pages: int | None = None


def derive(
    staged: StagedFile, verified: VerifiedType, *, declared_mime: str = "", text_budget: int = 0
) -> Derived:
    """Check images with Pillow, PDFs with pypdf (text, page 1 thumbnail), read text files
    and container hints, a video's first frame as its poster (chat.media.video); raises
    MediaRejected."""
    signature = verified.signature
    if signature is not None and signature.mime == "application/pdf":
        doc = read_pdf(staged.path, budget=text_budget)
        return Derived(
            MediaHints(),
            thumbnail=doc.thumbnail,
            text=doc.text if text_budget else None,
            text_truncated=doc.truncated,
            pages=doc.pages,
        )
    if signature is None and text_budget and is_text_type(declared_mime):
        doc = read_text_file(staged.path, budget=text_budget)
        return Derived(MediaHints(), text=doc.text, text_truncated=doc.truncated)
    if verified.kind == "image" and signature is not None and signature.pillow_format:
        facts = inspect_image(staged.path, signature.pillow_format)
        return Derived(
            MediaHints(width=facts.width, height=facts.height), facts.thumbnail, facts.poster
        )
    with open(staged.path, "rb") as handle:
        hints = container_hints(handle, file_size=staged.size, signature=signature)
        stills = None
        if hints.first_frame and hints.first_frame[1] <= MAX_VIDEO_FRAME:
            stills = video_stills(read_at(handle, *hints.first_frame))
    if stills is None and verified.kind == "video" and signature is not None:
        frame = video_first_frame(staged.path, mime=signature.mime)
        if frame is not None:
            stills = encode_derivative(frame, POSTER_MAX), encode_derivative(frame, THUMBNAIL_MAX)
    if stills is None:
        return Derived(hints)
    return Derived(hints, thumbnail=stills[1], poster=stills[0])


def process_staged_file(
    path: Path,
    *,
    kind: str,
    declared_mime: str,
    max_bytes: int,
    store: Callable[..., str],
    staged: StagedFile | None = None,
    text_budget: int = 0,
    expected_size: int | None = None,
) -> ProcessedMedia:
    """Hash, verify, derive and store one staged file. Raises MediaRejected.

    ``store(name, *, path=None, data=None, size)`` writes content to the storage under
    ``name`` (or reuses what is there) and returns the name. ``staged``: the file's hash
    when the caller already has it (a decoded base64 staging file). ``expected_size``: the
    size recorded when the file was staged; a file of another size is rejected.
    """
    if staged is None:
        staged = hash_file(path)
    if expected_size is not None and staged.size != expected_size:
        # A power loss before the kernel wrote the staged file back (it is not fsynced).
        raise MediaRejected(
            f"The file arrived incomplete ({staged.size:,} of {expected_size:,} bytes); "
            "nothing was stored. Send it again."
        )
    if staged.size == 0:
        raise MediaRejected("The file is empty.")
    if staged.size > max_bytes:
        raise MediaRejected(too_large_reason(staged.size, max_bytes))
    verified = check_declared_type(staged.head, declared=declared_mime, kind=kind)
    derived = derive(staged, verified, declared_mime=declared_mime, text_budget=text_budget)
    storage_path = store(content_name(staged.sha256), path=staged.path, size=staged.size)
    processed = ProcessedMedia(
        sha256=staged.sha256,
        size=staged.size,
        mime=verified.mime,
        kind=kind,
        storage_path=storage_path,
        width=derived.hints.width,
        height=derived.hints.height,
        duration=derived.hints.duration,
        text_truncated=derived.text_truncated,
        pages=derived.pages,
    )
    if derived.text is not None:
        data = derived.text.encode("utf-8")
        name = content_name(staged.sha256, f".text{text_budget}.txt")
        processed.text_path = store(name, data=data, size=len(data))
    if derived.thumbnail is not None:
        name = content_name(staged.sha256, f".thumb{THUMBNAIL_MAX}.{derived.thumbnail.extension}")
        processed.thumbnail_path = store(
            name, data=derived.thumbnail.data, size=len(derived.thumbnail.data)
        )
    if derived.poster is not None:
        name = content_name(staged.sha256, f".poster{POSTER_MAX}.{derived.poster.extension}")
        processed.poster_path = store(name, data=derived.poster.data, size=len(derived.poster.data))
    return processed
