"""Images with Pillow, safely: decompression-bomb limits, only the declared format, stills.

Pillow opens a payload only as the format its magic number says (``chat.media.formats``),
with a hard pixel limit (:data:`MAX_IMAGE_PIXELS`; its bomb warning becomes an error);
every Pillow failure becomes a ``MediaRejected`` a person can read. Thumbnails (320 px,
EXIF-oriented; frame 0 of animated images) and posters (960 px; a Motion-JPEG video's
first frame) are WebP, PNG where WebP is unavailable.
"""

from __future__ import annotations

import io
import logging
import struct
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from PIL import Image, ImageOps, features

from .formats import HEAD_BYTES, MediaRejected, check_declared_type

log = logging.getLogger(__name__)

MAX_IMAGE_PIXELS = 50_000_000
THUMBNAIL_MAX = 320
POSTER_MAX = 960


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


def check_image_header(source: str | Path | BinaryIO, pillow_format: str) -> tuple[int, int]:
    """The size an image's header declares, within the bomb limits; nothing is decoded
    and the body is not read (the upload path: a member hears at once). Raises
    MediaRejected."""
    with _image_errors(source, pillow_format):
        with Image.open(source, formats=[pillow_format]) as image:
            width, height = image.size
        if width * height > MAX_IMAGE_PIXELS:
            raise MediaRejected(_bomb_reason((width, height)))
        return width, height


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
