"""What media content is, from its bytes alone (pure: no Django, no Pillow).

The magic-number table (``SIGNATURES``) says what a declared type's content must start
with; ``check_declared_type`` holds a payload to it. Container parsers read hints (size,
duration, a video's first frame) from WAV and AVI headers and MP4 ``mvhd`` boxes, reading
only the few bytes they need. Used by the worker (``chat.media.services``) and, for small
payloads inlined on the request path, by ``chat.media.images.inline_rejection``.

Magic numbers (``SIGNATURES``: what the content must start with for a declared type):

    declared type(s)                          content starts with (byte offset)        label
    image/png, image/apng                     89 50 4E 47 0D 0A 1A 0A                  PNG image
    image/jpeg, image/jpg, image/pjpeg        FF D8 FF                                 JPEG image
    image/gif                                 'GIF87a' or 'GIF89a'                     GIF image
    image/webp                                'RIFF' at 0 and 'WEBP' at 8              WebP image
    image/bmp, image/x-ms-bmp                 'BM'                                     BMP image
    image/tiff                                49 49 2A 00 or 4D 4D 00 2A               TIFF image
    image/x-icon, image/vnd.microsoft.icon    00 00 01 00                              ICO image
    image/avif                                'ftyp' at 4, brand 'avif'/'avis' at 8    AVIF image
    audio/wav, audio/x-wav, audio/wave        'RIFF' at 0 and 'WAVE' at 8              WAV audio
    audio/aac, audio/aacp                     ADTS sync: FF then F0/F1/F8/F9           AAC audio
    audio/mpeg, audio/mp3                     'ID3', or frame sync FF Ex (layer != 0)  MP3 audio
    audio/ogg, audio/opus, video/ogg          'OggS'                                   Ogg media
    audio/flac, audio/x-flac                  'fLaC'                                   FLAC audio
    video/mp4, audio/mp4, audio/x-m4a, 3gpp   'ftyp' at 4 (ISO base media)             MP4 media
    video/quicktime                           'ftyp'/'moov'/'mdat'/'wide'/'free' at 4  QuickTime video
    video/webm, audio/webm, video/x-matroska  1A 45 DF A3 (EBML)                       WebM/Matroska
    video/x-msvideo, video/avi                'RIFF' at 0 and 'AVI ' at 8              AVI video
    application/pdf                           '%PDF-'                                  PDF document
    application/zip (and ZIP-based types)     'PK' 03 04 / 05 06 / 07 08               ZIP archive
    application/gzip, application/x-gzip      1F 8B                                    gzip archive
    (none: named in reasons only)             7F 'ELF' / 'MZ'                          executables

Images and audio/video must match one of these rows (unknown image/audio/video types are
rejected: they cannot be verified). Other files are verified when their declared type has a
row (PDF, ZIP, gzip) and otherwise stored as opaque binaries, served as
``application/octet-stream`` attachments.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

HEAD_BYTES = 512  # what a type check reads of a file
MEDIA_KINDS = ("image", "audio", "video", "binary")


class MediaRejected(Exception):
    """The content is not acceptable; ``reason`` is shown to people as it is."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TransientMediaError(Exception):
    """A failure that may go away on its own (storage hiccup, missing shared mount)."""


@dataclass(frozen=True)
class Signature:
    """One row of the magic-number table."""

    label: str  # shown in rejection reasons: "The file's content (ZIP archive) …"
    mime: str  # the canonical type served for this content
    accepts: frozenset[str]  # declared types this content satisfies
    matches: Callable[[bytes], bool]
    pillow_format: str | None = None  # images: the only format Pillow may open it as


def _starts(*prefixes: bytes) -> Callable[[bytes], bool]:
    return lambda head: any(head.startswith(p) for p in prefixes)


def _riff(form: bytes) -> Callable[[bytes], bool]:
    return lambda head: head[:4] == b"RIFF" and head[8:12] == form


def _ftyp_brand(*brands: bytes) -> Callable[[bytes], bool]:
    return lambda head: head[4:8] == b"ftyp" and head[8:12] in brands


def _iso_media(head: bytes) -> bool:
    return head[4:8] == b"ftyp"


def _quicktime(head: bytes) -> bool:
    return head[4:8] in (b"ftyp", b"moov", b"mdat", b"wide", b"free", b"skip", b"pnot")


def _mp3(head: bytes) -> bool:
    if head.startswith(b"ID3"):
        return True
    # MPEG audio frame: 11 sync bits, then version and a layer that is not "reserved" (00).
    return len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0 and head[1] & 0x06 != 0


def _adts(head: bytes) -> bool:
    # AAC ADTS: 12 sync bits, layer 00 (which is what tells it apart from MP3).
    return len(head) >= 2 and head[0] == 0xFF and head[1] & 0xF6 == 0xF0


def _mimes(*names: str) -> frozenset[str]:
    return frozenset(names)


SIGNATURES: tuple[Signature, ...] = (
    Signature(
        "PNG image",
        "image/png",
        _mimes("image/png", "image/apng"),
        _starts(b"\x89PNG\r\n\x1a\n"),
        "PNG",
    ),
    Signature(
        "JPEG image",
        "image/jpeg",
        _mimes("image/jpeg", "image/jpg", "image/pjpeg"),
        _starts(b"\xff\xd8\xff"),
        "JPEG",
    ),
    Signature("GIF image", "image/gif", _mimes("image/gif"), _starts(b"GIF87a", b"GIF89a"), "GIF"),
    Signature("WebP image", "image/webp", _mimes("image/webp"), _riff(b"WEBP"), "WEBP"),
    Signature(
        "BMP image", "image/bmp", _mimes("image/bmp", "image/x-ms-bmp"), _starts(b"BM"), "BMP"
    ),
    Signature(
        "TIFF image", "image/tiff", _mimes("image/tiff"), _starts(b"II*\x00", b"MM\x00*"), "TIFF"
    ),
    Signature(
        "ICO image",
        "image/x-icon",
        _mimes("image/x-icon", "image/vnd.microsoft.icon"),
        _starts(b"\x00\x00\x01\x00"),
        "ICO",
    ),
    Signature(
        "AVIF image", "image/avif", _mimes("image/avif"), _ftyp_brand(b"avif", b"avis"), "AVIF"
    ),
    Signature(
        "WAV audio",
        "audio/wav",
        _mimes("audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"),
        _riff(b"WAVE"),
    ),
    Signature(
        "AVI video",
        "video/x-msvideo",
        _mimes("video/x-msvideo", "video/avi", "video/msvideo"),
        _riff(b"AVI "),
    ),
    Signature("AAC audio", "audio/aac", _mimes("audio/aac", "audio/aacp", "audio/x-aac"), _adts),
    Signature("MP3 audio", "audio/mpeg", _mimes("audio/mpeg", "audio/mp3", "audio/x-mp3"), _mp3),
    Signature(
        "Ogg media",
        "audio/ogg",
        _mimes("audio/ogg", "audio/opus", "audio/vorbis", "video/ogg", "application/ogg"),
        _starts(b"OggS"),
    ),
    Signature("FLAC audio", "audio/flac", _mimes("audio/flac", "audio/x-flac"), _starts(b"fLaC")),
    Signature(
        "MP4 media",
        "video/mp4",
        _mimes(
            "video/mp4",
            "audio/mp4",
            "audio/x-m4a",
            "audio/m4a",
            "video/x-m4v",
            "video/3gpp",
            "audio/3gpp",
            "video/3gpp2",
            "audio/3gpp2",
        ),
        _iso_media,
    ),
    Signature("QuickTime video", "video/quicktime", _mimes("video/quicktime"), _quicktime),
    Signature(
        "WebM/Matroska media",
        "video/webm",
        _mimes("video/webm", "audio/webm", "video/x-matroska", "audio/x-matroska"),
        _starts(b"\x1a\x45\xdf\xa3"),
    ),
    Signature("PDF document", "application/pdf", _mimes("application/pdf"), _starts(b"%PDF-")),
    Signature(
        "ZIP archive",
        "application/zip",
        _mimes(
            "application/zip",
            "application/x-zip-compressed",
            "application/epub+zip",
            "application/java-archive",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            "application/vnd.openxmlformats-officedocument.presentationml.presentation",
            "application/vnd.oasis.opendocument.text",
        ),
        _starts(b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08"),
    ),
    Signature(
        "gzip archive",
        "application/gzip",
        _mimes("application/gzip", "application/x-gzip"),
        _starts(b"\x1f\x8b"),
    ),
    # Recognized only to name them in a rejection reason; no declared type accepts them.
    Signature("Linux executable", "application/octet-stream", frozenset(), _starts(b"\x7fELF")),
    Signature("Windows executable", "application/octet-stream", frozenset(), _starts(b"MZ")),
)

_ACCEPTED_BY: dict[str, tuple[Signature, ...]] = {}
for _signature in SIGNATURES:
    for _declared in _signature.accepts:
        _ACCEPTED_BY[_declared] = (*_ACCEPTED_BY.get(_declared, ()), _signature)

IMAGE_FORMATS = ", ".join(s.label.removesuffix(" image") for s in SIGNATURES if s.pillow_format)


def identify(head: bytes) -> Signature | None:
    """The table row the content matches, if any (first match wins)."""
    for signature in SIGNATURES:
        if signature.matches(head):
            return signature
    return None


def describe_content(head: bytes) -> str:
    """A short human name for what the bytes look like (for rejection reasons)."""
    signature = identify(head)
    if signature is not None:
        return signature.label
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith((b"<!doctype html", b"<html")):
        return "HTML document"
    if text.startswith(b"<svg") or (text.startswith(b"<?xml") and b"<svg" in text):
        return "SVG image"
    if text.startswith(b"<?xml"):
        return "XML document"
    if head and all(b in b"\t\n\r" or 32 <= b < 127 or b >= 128 for b in head):
        try:
            head.decode("utf-8")
            return "text"
        except UnicodeDecodeError:
            pass
    return "unrecognized binary data"


def verifiable(declared: str) -> bool:
    return declared in _ACCEPTED_BY


@dataclass(frozen=True)
class VerifiedType:
    kind: str
    mime: str  # the type the content is served as
    signature: Signature | None  # None: an opaque binary (not checkable, not claimed)


def check_declared_type(head: bytes, *, declared: str, kind: str) -> VerifiedType:
    """Match the content's magic number against the declared type. Raises MediaRejected."""
    declared = declared.strip().lower()
    accepted = _ACCEPTED_BY.get(declared, ())
    if kind == "image" and not any(s.pillow_format for s in accepted):
        raise MediaRejected(
            f"Images of type {declared} are not accepted (accepted: {IMAGE_FORMATS})."
        )
    if kind in ("audio", "video") and not accepted:
        raise MediaRejected(
            f"{kind.capitalize()} of type {declared} cannot be verified, so it was not stored."
        )
    if not accepted:  # an opaque binary: nothing to check, served as a download
        return VerifiedType(kind=kind, mime="application/octet-stream", signature=None)
    found = identify(head)
    if found is None or found not in accepted:
        raise MediaRejected(
            f"The file's content ({describe_content(head)}) does not match its declared "
            f"type {declared}."
        )
    return VerifiedType(
        kind=kind, mime=declared if kind != "image" else found.mime, signature=found
    )


def served_type(*, kind: str, declared: str) -> str:
    """The Content-Type a stored asset is served with (only verified types are trusted)."""
    declared = declared.strip().lower()
    accepted = _ACCEPTED_BY.get(declared, ())
    if not accepted:
        return "application/octet-stream"
    if kind == "image":
        return next((s.mime for s in accepted if s.pillow_format), "application/octet-stream")
    return declared


# ============================================================================ container hints


@dataclass
class MediaHints:
    width: int | None = None
    height: int | None = None
    duration: float | None = None
    first_frame: tuple[int, int] | None = None  # (offset, length) of a video's first frame


def _chunks(
    fh: BinaryIO, start: int, end: int, limit: int = 10_000
) -> Iterator[tuple[bytes, int, int]]:
    """RIFF chunks between two offsets: (fourcc, data offset, data size)."""
    pos = start
    for _ in range(limit):
        if pos + 8 > end:
            return
        fh.seek(pos)
        header = fh.read(8)
        if len(header) < 8:
            return
        fourcc, size = header[:4], struct.unpack("<I", header[4:])[0]
        yield fourcc, pos + 8, size
        pos += 8 + size + (size & 1)


def wav_hints(fh: BinaryIO, file_size: int) -> MediaHints:
    """Duration of a WAV from its ``fmt `` (byte rate) and ``data`` (size) chunks."""
    byte_rate = 0
    for fourcc, offset, size in _chunks(fh, 12, file_size):
        if fourcc == b"fmt " and size >= 16:
            fh.seek(offset)
            fmt = fh.read(16)
            byte_rate = struct.unpack("<HHIIHH", fmt)[3]
        elif fourcc == b"data":
            data_size = min(size, file_size - offset)  # streamed WAVs claim 0xFFFFFFFF
            if byte_rate > 0:
                return MediaHints(duration=round(data_size / byte_rate, 3))
            return MediaHints()
    return MediaHints()


def avi_hints(fh: BinaryIO, file_size: int) -> MediaHints:
    """Size and duration from the AVI main header; where the first video frame is."""
    hints = MediaHints()
    riff_end = min(file_size, 8 + struct.unpack("<I", read_at(fh, 4, 4))[0])
    for fourcc, offset, size in _chunks(fh, 12, riff_end):
        if fourcc != b"LIST" or size < 4:
            continue
        kind = read_at(fh, offset, 4)
        end = min(offset + size, riff_end)
        if kind == b"hdrl":
            for inner, inner_offset, inner_size in _chunks(fh, offset + 4, end):
                if inner == b"avih" and inner_size >= 40:
                    fields = struct.unpack("<10I", read_at(fh, inner_offset, 40))
                    usec_per_frame, total_frames = fields[0], fields[4]
                    hints.width, hints.height = fields[8] or None, fields[9] or None
                    if usec_per_frame and total_frames:
                        hints.duration = round(total_frames * usec_per_frame / 1_000_000, 3)
                    break
        elif kind == b"movi":
            hints.first_frame = _first_video_chunk(fh, offset + 4, end)
            break
    return hints


def _first_video_chunk(fh: BinaryIO, start: int, end: int) -> tuple[int, int] | None:
    for fourcc, offset, size in _chunks(fh, start, end):
        if fourcc == b"LIST":  # 'rec ' groups
            found = _first_video_chunk(fh, offset + 4, min(offset + size, end))
            if found:
                return found
        elif fourcc[2:4] in (b"dc", b"db") and size > 0:
            return offset, min(size, end - offset)
    return None


def mp4_hints(fh: BinaryIO, file_size: int) -> MediaHints:
    """Duration from the ``moov/mvhd`` box (wherever ``moov`` sits in the file)."""
    moov = _find_box(fh, 0, file_size, b"moov")
    if moov is None:
        return MediaHints()
    mvhd = _find_box(fh, moov[0], moov[0] + moov[1], b"mvhd")
    if mvhd is None or mvhd[1] < 20:
        return MediaHints()
    body = read_at(fh, mvhd[0], min(mvhd[1], 32))
    if body[0] == 1 and len(body) >= 32:
        timescale, duration = struct.unpack(">IQ", body[20:32])
    else:
        timescale, duration = struct.unpack(">II", body[12:20])
    if timescale:
        return MediaHints(duration=round(duration / timescale, 3))
    return MediaHints()


def _find_box(fh: BinaryIO, start: int, end: int, wanted: bytes) -> tuple[int, int] | None:
    """(data offset, data size) of the first ISO-BMFF box of a type between two offsets."""
    pos = start
    for _ in range(10_000):
        if pos + 8 > end:
            return None
        header = read_at(fh, pos, 16)
        if len(header) < 8:
            return None
        size, kind = struct.unpack(">I4s", header[:8])
        header_size = 8
        if size == 1 and len(header) >= 16:
            size, header_size = struct.unpack(">Q", header[8:16])[0], 16
        elif size == 0:
            size = end - pos
        if size < header_size:
            return None
        if kind == wanted:
            return pos + header_size, min(size, end - pos) - header_size
        pos += size
    return None


def read_at(fh: BinaryIO, offset: int, size: int) -> bytes:
    fh.seek(offset)
    return fh.read(size)


HINT_READERS: dict[str, Callable[[BinaryIO, int], MediaHints]] = {
    "WAV audio": wav_hints,
    "AVI video": avi_hints,
    "MP4 media": mp4_hints,
    "QuickTime video": mp4_hints,
}


def container_hints(fh: BinaryIO, *, file_size: int, signature: Signature | None) -> MediaHints:
    """Best-effort hints; a malformed container gives none rather than an error."""
    reader = HINT_READERS.get(signature.label) if signature else None
    if reader is None:
        return MediaHints()
    try:
        return reader(fh, file_size)
    except (struct.error, OSError, ValueError, IndexError):
        return MediaHints()
