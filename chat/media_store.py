"""Persisting staged tool-result media (DESIGN §4, stage 2 of 3).

The request path wrote each payload it did not inline to ``MEDIA_STAGING_ROOT/<stagingKey>``
— decoded, or for a large one still base64 (``<key>.b64``, see ``chat.media``) — and
created a ``MediaAsset`` (status ``staged``). The worker (``chat.tasks``) calls
:func:`persist_asset`, which

1. claims the asset (``attempts`` + 1, committed first, so a crash loop ends in a rejection),
2. hashes the staging file in one streaming pass (sha256, size, the first bytes); a base64
   staging file is decoded strictly in the same pass (into ``<key>.decoded``), and must
   decode to the size the request path recorded,
3. verifies the content against the declared MIME type: the magic-number table below for
   every kind, and Pillow (restricted to the declared format, decompression-bomb warnings
   escalated to errors, :data:`MAX_IMAGE_PIXELS`) for images,
4. stores it content-addressed in Django's default storage, ``sha256/ab/cd/<sha256>``
   (an existing file with the same digest and size is reused),
5. derives a thumbnail (images: 320 px, EXIF-oriented; animated images: frame 0) and a
   poster (first JPEG frame of a Motion-JPEG AVI; frame 0 of an animated image), and
   hints (width, height, duration: WAV and AVI headers, MP4 ``mvhd``),
6. marks the asset ``ready`` or ``rejected`` (with a reason a person can read), audits it,
   rewrites the tool call's stored result part (and its ``resources`` entry) and emits
   ``media`` + ``toolcall`` events — all in one transaction — and, once that commits,
   deletes the staging file (and, in the embedded profile, asks daphne to broadcast the
   events: see "relay" below).

Memory stays bounded: files are read in 1 MiB chunks (base64 in 4 MiB), never whole; the
only full decodes are images (at most ``MAX_IMAGE_PIXELS``) and one video frame.

The request path runs the same type checks on payloads small enough to be inlined as
``data:`` URIs (:func:`inline_rejection`), so those are refused with the same words.

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

import binascii
import hashlib
import io
import logging
import os
import re
import struct
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from PIL import Image, ImageOps, features

log = logging.getLogger(__name__)

MAX_IMAGE_PIXELS = 50_000_000
THUMBNAIL_MAX = 320
POSTER_MAX = 960
HASH_CHUNK = 1024 * 1024
BASE64_CHUNK = 4 * 1024 * 1024  # characters of a base64 staging file read at a time
HEAD_BYTES = 512
MAX_VIDEO_FRAME = 16 * 1024 * 1024  # a poster frame larger than this is not decoded
MAX_ATTEMPTS = 10  # runs of one asset (retries, redeliveries, requeues) before rejection
MEDIA_KINDS = ("image", "audio", "video", "binary")
_STAGING_KEY_RE = re.compile(r"^[0-9a-f]{32}(\.b64)?$")
ENCODED_SUFFIX = ".b64"  # a staging file holding base64 text (chat.media)
DECODED_SUFFIX = ".decoded"  # where the worker decodes one to (never a staging key)
_BASE64_SPACE = b" \t\n\r"  # what the request path's size count skips, too
INVALID_BASE64 = "The media's data is not valid base64, so it was not stored."


class MediaRejected(Exception):
    """The content is not acceptable; ``reason`` is shown to people as it is."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TransientMediaError(Exception):
    """A failure that may go away on its own (storage hiccup, missing shared mount)."""


# ============================================================================ magic numbers


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
    riff_end = min(file_size, 8 + struct.unpack("<I", _read_at(fh, 4, 4))[0])
    for fourcc, offset, size in _chunks(fh, 12, riff_end):
        if fourcc != b"LIST" or size < 4:
            continue
        kind = _read_at(fh, offset, 4)
        end = min(offset + size, riff_end)
        if kind == b"hdrl":
            for inner, inner_offset, inner_size in _chunks(fh, offset + 4, end):
                if inner == b"avih" and inner_size >= 40:
                    fields = struct.unpack("<10I", _read_at(fh, inner_offset, 40))
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
    body = _read_at(fh, mvhd[0], min(mvhd[1], 32))
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
        header = _read_at(fh, pos, 16)
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


def _read_at(fh: BinaryIO, offset: int, size: int) -> bytes:
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


# ============================================================================ images (Pillow)


@contextmanager
def image_safety() -> Iterator[None]:
    """Pillow with a hard pixel limit: its bomb warning becomes an error, and so does its
    error (which it raises above twice the limit)."""
    previous = Image.MAX_IMAGE_PIXELS
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS
        try:
            yield
        finally:
            Image.MAX_IMAGE_PIXELS = previous


def _bomb_reason(size: tuple[int, int] | None = None) -> str:
    detail = f"{size[0]} × {size[1]} pixels; " if size else ""
    return (
        f"The image is larger than {MAX_IMAGE_PIXELS // 1_000_000} megapixels "
        f"({detail}decompression bomb protection)."
    )


def _declared_size(source: str | Path | BinaryIO, pillow_format: str) -> tuple[int, int] | None:
    """The size an image header declares, read without Pillow's bomb check (for reasons)."""
    try:
        previous = Image.MAX_IMAGE_PIXELS
        Image.MAX_IMAGE_PIXELS = None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with Image.open(source, formats=[pillow_format]) as image:
                    return image.size
        finally:
            Image.MAX_IMAGE_PIXELS = previous
    except Exception:
        return None


@dataclass
class Derivative:
    data: bytes
    extension: str  # "webp" | "png"


@dataclass
class ImageFacts:
    width: int
    height: int
    frames: int
    thumbnail: Derivative
    poster: Derivative | None  # frame 0, for animated images


def _displayable(image: Image.Image) -> Image.Image:
    has_alpha = image.mode in ("RGBA", "LA", "PA") or (
        image.mode == "P" and "transparency" in image.info
    )
    if image.mode == ("RGBA" if has_alpha else "RGB"):
        return image
    if image.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        image = image.convert("I").point(lambda value: value * (1 / 256)).convert("L")
    return image.convert("RGBA" if has_alpha else "RGB")


def encode_derivative(image: Image.Image, max_side: int) -> Derivative:
    """A still no larger than max_side × max_side, as WebP (PNG when WebP is unavailable)."""
    still = _displayable(image.copy())
    still.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    if features.check("webp"):
        still.save(buffer, format="WEBP", quality=82, method=4)
        return Derivative(buffer.getvalue(), "webp")
    still.save(buffer, format="PNG", optimize=True)
    return Derivative(buffer.getvalue(), "png")


@contextmanager
def _image_errors(source: str | Path | BinaryIO, pillow_format: str) -> Iterator[None]:
    """Pillow's failures, as rejections a person can read."""
    try:
        with image_safety():
            yield
    except MediaRejected:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        if not isinstance(source, (str, Path)):
            source.seek(0)
        raise MediaRejected(_bomb_reason(_declared_size(source, pillow_format))) from None
    except Image.UnidentifiedImageError:
        raise MediaRejected(f"The file could not be read as a {pillow_format} image.") from None
    except (OSError, SyntaxError, ValueError, EOFError, struct.error, MemoryError) as exc:
        detail = str(exc).strip().rstrip(".")[:120]
        raise MediaRejected(
            "The image data is damaged or incomplete" + (f" ({detail})." if detail else ".")
        ) from None


def _open_and_verify(source: str | Path | BinaryIO, pillow_format: str) -> tuple[int, int]:
    """Size and structure check (inside ``_image_errors``); the image is not decoded."""
    with Image.open(source, formats=[pillow_format]) as image:
        width, height = image.size
        if width * height > MAX_IMAGE_PIXELS:
            raise MediaRejected(_bomb_reason((width, height)))
        image.verify()  # structure and checksums; leaves the image unusable
    return width, height


def verify_image(source: str | Path | BinaryIO, pillow_format: str) -> tuple[int, int]:
    """Open (only as ``pillow_format``) and verify, with the bomb limits; (width, height).

    Raises MediaRejected. Cheap: nothing is decoded (the request path uses it)."""
    with _image_errors(source, pillow_format):
        return _open_and_verify(source, pillow_format)


def inspect_image(
    source: str | Path | BinaryIO, pillow_format: str, *, want_poster: bool = False
) -> ImageFacts:
    """Open (only as ``pillow_format``), check, decode frame 0, and derive the stills
    (a poster too for animated images, or when ``want_poster``).

    Raises MediaRejected for bombs, damaged data, or content Pillow cannot read as that
    format.
    """
    with _image_errors(source, pillow_format):
        width, height = _open_and_verify(source, pillow_format)
        if not isinstance(source, (str, Path)):
            source.seek(0)
        with Image.open(source, formats=[pillow_format]) as image:
            frames = int(getattr(image, "n_frames", 1) or 1)
            image.seek(0)
            if pillow_format == "JPEG":
                image.draft("RGB", (POSTER_MAX * 2, POSTER_MAX * 2))
            oriented = ImageOps.exif_transpose(image)  # decodes frame 0
            if oriented.size != image.size and oriented.size[::-1] == image.size:
                width, height = height, width
            thumbnail = encode_derivative(oriented, THUMBNAIL_MAX)
            wanted = want_poster or frames > 1
            poster = encode_derivative(oriented, POSTER_MAX) if wanted else None
    return ImageFacts(width=width, height=height, frames=frames, thumbnail=thumbnail, poster=poster)


def inline_rejection(*, kind: str, declared: str, data: bytes) -> str | None:
    """Why a small payload must not be inlined (``None``: it may): the worker's magic-number
    check, and for images Pillow's open + verify with the bomb limits — same reasons, same
    words. Nothing is decoded; milliseconds for the ≤ 64 KB the request path inlines."""
    try:
        verified = check_declared_type(data[:HEAD_BYTES], declared=declared, kind=kind)
        signature = verified.signature
        if kind == "image" and signature is not None and signature.pillow_format:
            verify_image(io.BytesIO(data), signature.pillow_format)
    except MediaRejected as exc:
        return exc.reason
    return None


def video_stills(frame: bytes) -> tuple[Derivative, Derivative] | None:
    """(poster, thumbnail) from one JPEG video frame; None if it is not a usable JPEG."""
    if not frame.startswith(b"\xff\xd8\xff"):
        return None
    try:
        facts = inspect_image(io.BytesIO(frame), "JPEG", want_poster=True)
    except MediaRejected as exc:
        log.info("no poster: %s", exc.reason)
        return None
    if facts.poster is None:
        return None
    return facts.poster, facts.thumbnail


# ============================================================================ the file itself


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


def _too_large_reason(size: int, max_bytes: int) -> str:
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


@dataclass
class Derived:
    hints: MediaHints
    thumbnail: Derivative | None = None
    poster: Derivative | None = None


def derive(staged: StagedFile, verified: VerifiedType) -> Derived:
    """Check images with Pillow and read container hints; raises MediaRejected."""
    signature = verified.signature
    if verified.kind == "image" and signature is not None and signature.pillow_format:
        facts = inspect_image(staged.path, signature.pillow_format)
        return Derived(
            MediaHints(width=facts.width, height=facts.height), facts.thumbnail, facts.poster
        )
    with open(staged.path, "rb") as handle:
        hints = container_hints(handle, file_size=staged.size, signature=signature)
        stills = None
        if hints.first_frame and hints.first_frame[1] <= MAX_VIDEO_FRAME:
            stills = video_stills(_read_at(handle, *hints.first_frame))
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
) -> ProcessedMedia:
    """Hash, verify, derive and store one staged file. Raises MediaRejected.

    ``store(name, *, path=None, data=None, size)`` writes content to the storage under
    ``name`` (or reuses what is there) and returns the name. ``staged``: the file's hash
    when the caller already has it (a decoded base64 staging file).
    """
    if staged is None:
        staged = hash_file(path)
    if staged.size == 0:
        raise MediaRejected("The file is empty.")
    if staged.size > max_bytes:
        raise MediaRejected(_too_large_reason(staged.size, max_bytes))
    verified = check_declared_type(staged.head, declared=declared_mime, kind=kind)
    derived = derive(staged, verified)
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
    )
    if derived.thumbnail is not None:
        name = content_name(staged.sha256, f".thumb{THUMBNAIL_MAX}.{derived.thumbnail.extension}")
        processed.thumbnail_path = store(
            name, data=derived.thumbnail.data, size=len(derived.thumbnail.data)
        )
    if derived.poster is not None:
        name = content_name(staged.sha256, f".poster{POSTER_MAX}.{derived.poster.extension}")
        processed.poster_path = store(name, data=derived.poster.data, size=len(derived.poster.data))
    return processed


# ============================================================================ Django: storage


def staging_file(key: str) -> Path | None:
    """The staging file of a key, or None for anything that is not a key we handed out."""
    from django.conf import settings

    if not _STAGING_KEY_RE.match(key or ""):
        return None
    return Path(settings.MEDIA_STAGING_ROOT) / key


def store_in_default_storage(
    name: str, *, path: Path | None = None, data: bytes | None = None, size: int
) -> str:
    """Content-addressed write: reuse an existing file of the same name and size."""
    from django.core.files import File
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    if default_storage.exists(name):
        if default_storage.size(name) == size:
            return name
        default_storage.delete(name)  # a torn earlier write: replace it
    if path is not None:
        with open(path, "rb") as handle:
            saved = default_storage.save(name, File(handle, name=os.path.basename(name)))
    else:
        saved = default_storage.save(name, ContentFile(data or b""))
    if saved != name:
        # Another worker stored the same digest meanwhile; the content is identical.
        default_storage.delete(saved)
    return name


def remove_staging_file(path: Path | None) -> None:
    if path is None:
        return
    try:
        path.unlink(missing_ok=True)
    except OSError:
        log.warning("could not delete staging file %s", path, exc_info=True)


# ============================================================================ Django: relay

# The embedded profile's channel layer lives inside the one daphne process, so events a
# worker *process* emits are stored but reach nobody live. There, the worker asks daphne to
# broadcast them (``media_views.media_relay``): the request names stored events only (thread
# and sequence numbers), is signed with SECRET_KEY, expires in a minute, and is accepted from
# loopback only. With a shared layer (Redis) the worker broadcasts itself and nothing is
# relayed. ``chat.events.emit`` relays every event a worker stores (media, approval expiry
# from beat tasks, …); removing the relay altogether is issue 15's step 3.
RELAY_SALT = "atrium.media.relay"
RELAY_MAX_AGE = 60
_relay_from_this_process = False


def enable_relay_from_this_process() -> None:
    """Called once a Celery worker process starts (``celeryd_init``)."""
    global _relay_from_this_process
    _relay_from_this_process = True


def channel_layer_is_process_local() -> bool:
    from django.conf import settings

    backend = settings.CHANNEL_LAYERS.get("default", {}).get("BACKEND", "")
    return backend == "channels.layers.InMemoryChannelLayer"


def relay_token(*, thread_id: int, seqs: list[int]) -> str:
    from django.core import signing

    return signing.dumps({"thread": thread_id, "seqs": seqs}, salt=RELAY_SALT)


def read_relay_token(token: str) -> tuple[int, list[int]] | None:
    from django.core import signing

    try:
        claims = signing.loads(token, salt=RELAY_SALT, max_age=RELAY_MAX_AGE)
        return int(claims["thread"]), [int(seq) for seq in claims["seqs"]][:20]
    except (signing.BadSignature, KeyError, TypeError, ValueError):
        return None


def relay_to_asgi(*, thread_id: int, seqs: list[int]) -> None:
    """Ask the ASGI process to broadcast stored events (embedded profile, worker only)."""
    if not (_relay_from_this_process and channel_layer_is_process_local()):
        return
    import httpx
    from django.conf import settings
    from django.urls import reverse

    url = settings.ATRIUM_APP_ORIGIN.rstrip("/") + reverse("media-relay")
    try:
        response = httpx.post(
            url, data={"token": relay_token(thread_id=thread_id, seqs=seqs)}, timeout=5.0
        )
        response.raise_for_status()
    except httpx.HTTPError as exc:
        # Stored anyway: clients see it on their next replay or reload.
        log.warning("could not relay media events %s of thread %s: %s", seqs, thread_id, exc)


# ============================================================================ Django: services


def asset_descriptor(asset: Any) -> dict[str, Any]:
    """The ``asset`` object of a stored result part (and the body of a ``media`` event)."""
    from django.urls import reverse

    ready = asset.status == "ready"

    def url(name: str, present: bool) -> str | None:
        return reverse(name, kwargs={"asset_id": asset.pk}) if ready and present else None

    return {
        "id": asset.pk,
        "status": asset.status,
        "url": url("media-asset", bool(asset.storage_path)),
        "thumbnailUrl": url("media-thumbnail", bool(asset.thumbnail_path)),
        "posterUrl": url("media-poster", bool(asset.poster_path)),
        "width": asset.width,
        "height": asset.height,
        "duration": asset.duration,
        "size": asset.size,
        "reason": asset.reason or None,
    }


def media_event(asset: Any) -> dict[str, Any]:
    return {**asset_descriptor(asset), "toolCallId": asset.tool_call_id}


def _apply_to_result(result: Any, asset_id: int, descriptor: dict[str, Any]) -> bool:
    """Rewrite the part that references the asset (and its ``resources`` entry) in place."""
    if not isinstance(result, dict) or not isinstance(result.get("parts"), list):
        return False
    media_parts = [
        p for p in result["parts"] if isinstance(p, dict) and p.get("type") in ("image", "file")
    ]
    resources = [
        r
        for r in result.get("resources") or []
        if isinstance(r, dict) and r.get("kind") in MEDIA_KINDS
    ]
    for index, part in enumerate(media_parts):
        current = part.get("asset")
        if not isinstance(current, dict) or current.get("id") != asset_id:
            continue
        part["asset"] = descriptor
        # Media parts and media resources are emitted pairwise, in the same order.
        if index < len(resources) and len(resources) == len(media_parts):
            resource = resources[index]
            resource["status"] = descriptor["status"]
            for key in ("width", "height", "duration"):
                if descriptor[key] is not None:
                    resource[key] = descriptor[key]
            if resource.get("uri") is None and descriptor["url"]:
                resource["uri"] = descriptor["url"]
        return True
    return False


def _finish(
    asset_id: int, *, processed: ProcessedMedia | None, reason: str = "", sha256: str = ""
) -> str:
    """Record the outcome, update the stored result, audit and emit — one transaction."""
    from django.db import transaction
    from django.utils import timezone

    from bindings.audit import record
    from bindings.events import AuditEventType, Decision

    from .events import emit
    from .models import MediaAsset, MediaStatus, ToolCall
    from .presenters import serialize_tool_call
    from .selectors import tool_calls_queryset

    with transaction.atomic():
        asset = (
            MediaAsset.objects.select_for_update()
            .select_related("thread")
            .filter(pk=asset_id)
            .first()
        )
        if asset is None or asset.status != MediaStatus.STAGED:
            return "skipped"  # deleted, or a concurrent run got there first
        staging = staging_file(asset.staging_path)
        if processed is not None:
            asset.status = MediaStatus.READY
            asset.sha256 = processed.sha256
            asset.size = processed.size
            asset.storage_path = processed.storage_path
            asset.thumbnail_path = processed.thumbnail_path
            asset.poster_path = processed.poster_path
            asset.width = processed.width
            asset.height = processed.height
            asset.duration = processed.duration
            asset.ready_at = timezone.now()
        else:
            asset.status = MediaStatus.REJECTED
            asset.reason = reason[:300]
            asset.sha256 = sha256 or asset.sha256
        asset.save()
        call = (
            ToolCall.objects.select_for_update().filter(pk=asset.tool_call_id).first()
            if asset.tool_call_id
            else None
        )
        record(
            event_type=AuditEventType.MEDIA_READY if processed else AuditEventType.MEDIA_REJECTED,
            decision=Decision.ALLOWED if processed else Decision.DENIED,
            actor_kind="system",
            actor_label="media worker",
            workspace_id=asset.thread.workspace_id,
            thread_id=asset.thread_id,
            binding_id=call.binding_id if call else None,
            server_id=call.server_id if call else None,
            tool_name=call.tool_name if call else "",
            action="persist_media",
            reason="ready" if processed else reason,
            extra={
                "asset_id": asset.pk,
                "tool_call_id": asset.tool_call_id,
                "kind": asset.kind,
                "declared_mime": asset.mime_type,
                "sha256": asset.sha256,
                "size": asset.size,
                "attempts": asset.attempts,
                "reason": reason or None,
            },
        )
        descriptor = asset_descriptor(asset)
        if call is not None and _apply_to_result(call.result, asset.pk, descriptor):
            call.save(update_fields=["result"])
        emit(thread_id=asset.thread_id, kind="media", payload=media_event(asset))
        if call is not None:
            fresh = tool_calls_queryset().get(pk=call.pk)
            emit(thread_id=asset.thread_id, kind="toolcall", payload=serialize_tool_call(fresh))
        transaction.on_commit(lambda: remove_staging_file(staging))
    return str(asset.status)


def _claim(asset_id: int) -> Any | None:
    """Count this run (committed before any work), or None when there is nothing to do."""
    from django.db import transaction

    from .models import MediaAsset, MediaStatus

    with transaction.atomic():
        asset = MediaAsset.objects.select_for_update().filter(pk=asset_id).first()
        if asset is None:
            return None
        if asset.status != MediaStatus.STAGED:
            staging = staging_file(asset.staging_path)
            transaction.on_commit(lambda: remove_staging_file(staging))  # a leftover, if any
            return None
        asset.attempts += 1
        asset.save(update_fields=["attempts"])
    return asset


def persist_asset(*, asset_id: int, final_attempt: bool = False) -> str:
    """Persist one staged asset. Idempotent: a ready or rejected asset is left alone.

    Returns ``ready``, ``rejected`` or ``skipped``. Raises TransientMediaError (or a
    database/storage OSError) when a retry may succeed.
    """
    from django.conf import settings
    from django.core.files.storage import default_storage

    asset = _claim(asset_id)
    if asset is None:
        return "skipped"
    if asset.attempts > MAX_ATTEMPTS:
        return _finish(
            asset_id,
            processed=None,
            reason=f"The media could not be processed after {MAX_ATTEMPTS} attempts.",
        )
    path = staging_file(asset.staging_path)
    if path is None:
        return _finish(asset_id, processed=None, reason="The media has no valid staging file.")
    if not path.exists():
        if final_attempt:
            return _finish(
                asset_id,
                processed=None,
                reason="The staged file is no longer available, so the media could not be stored.",
            )
        raise TransientMediaError(f"staging file {path.name} of asset {asset_id} is missing")
    max_bytes = int(getattr(settings, "ATRIUM_MEDIA_MAX_BYTES", 200 * 1024 * 1024))
    decoded = (
        path.with_name(path.name + DECODED_SUFFIX) if path.name.endswith(ENCODED_SUFFIX) else None
    )
    try:
        staged = None
        if decoded is not None:
            if asset.size > max_bytes:
                raise MediaRejected(_too_large_reason(asset.size, max_bytes))
            staged = decode_base64_file(path, decoded, expected_size=asset.size or None)
        processed = process_staged_file(
            decoded or path,
            kind=asset.kind if asset.kind in MEDIA_KINDS else "binary",
            declared_mime=asset.mime_type,
            max_bytes=max_bytes,
            store=store_in_default_storage,
            staged=staged,
        )
    except MediaRejected as exc:
        log.info("media %s rejected: %s", asset_id, exc.reason)
        return _finish(asset_id, processed=None, reason=exc.reason)
    finally:
        remove_staging_file(decoded)
    log.info(
        "media %s stored as %s (%s bytes) in %s",
        asset_id,
        processed.sha256,
        processed.size,
        type(default_storage).__name__,
    )
    return _finish(asset_id, processed=processed)


def staged_asset_ids(*, older_than: float, limit: int | None = None) -> list[int]:
    """Staged assets created more than ``older_than`` seconds ago, oldest first."""
    from datetime import timedelta

    from django.utils import timezone

    from .models import MediaAsset, MediaStatus

    cutoff = timezone.now() - timedelta(seconds=max(0.0, older_than))
    rows = MediaAsset.objects.filter(status=MediaStatus.STAGED, created_at__lte=cutoff)
    ids = rows.order_by("id").values_list("id", flat=True)
    return list(ids[:limit] if limit else ids)
