"""Documents the model reads: PDFs (pypdf for text, pypdfium2 for the first page's
thumbnail) and text files. Pure: no Django.

Bounded work, whatever the file says:

- pypdf's own decompression limits (``pypdf.filters.ZLIB_MAX_OUTPUT_LENGTH`` and friends)
  stop a stream that inflates past them (a PDF decompression bomb): ``LimitReachedError``
  becomes a rejection;
- at most :data:`MAX_PAGES_READ` pages are read for text, and reading stops at the text
  budget (characters); the page count is read from the page tree, not by walking content;
- the thumbnail renders page 1 only, scaled so its longer side is ``THUMBNAIL_MAX`` pixels,
  and only after pypdf has read that page's content within the limits; a page whose
  declared size would need more than ``MAX_RENDER_PIXELS`` is not rendered;
- text files are read for at most ``budget * 4`` bytes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from .formats import MediaRejected
from .images import THUMBNAIL_MAX, Derivative, encode_derivative

log = logging.getLogger(__name__)

MAX_PAGES_READ = 200
MAX_PDF_PAGES = 20_000  # a page tree claiming more is refused (nothing is read from it)
MAX_RENDER_PIXELS = 4_000_000
TEXT_MIMES = ("text/", "application/json", "application/xml", "application/x-yaml")
PDF_BOMB = (
    "The PDF expands to more data than Atrium reads (decompression bomb protection), "
    "so it was not stored."
)


@dataclass
class DocumentFacts:
    text: str = ""
    truncated: bool = False
    pages: int | None = None
    thumbnail: Derivative | None = None


def is_text_type(mime: str) -> bool:
    mime = (mime or "").lower()
    return any(mime.startswith(prefix) for prefix in TEXT_MIMES)


def truncation_note(*, budget: int, pages_read: int | None = None) -> str:
    """The visible note the model (and docs/files.md) sees where a text was cut."""
    where = f" (first {pages_read} pages)" if pages_read else ""
    return f"[Atrium: the text was cut to the first {budget:,} characters{where}.]"


def read_text_file(path: Path, *, budget: int) -> DocumentFacts:
    """The first ``budget`` characters of a text file (UTF-8, undecodable bytes replaced)."""
    with open(path, "rb") as handle:
        data = handle.read(budget * 4 + 1)
    text = data.decode("utf-8", errors="replace").replace("\x00", "")
    truncated = len(data) > budget * 4 or len(text) > budget
    return DocumentFacts(text=text[:budget], truncated=truncated)


def read_pdf(path: Path, *, budget: int) -> DocumentFacts:
    """Text (to the budget), page count and a first-page thumbnail. Raises MediaRejected."""
    # Imported when a PDF is read, not when a process starts (pypdf and pypdfium2: ≈ 70 ms
    # of every web, worker and `manage.py` start otherwise; docs/testing.md, "Bytecode").
    from pypdf import PdfReader
    from pypdf.errors import LimitReachedError, PdfReadError

    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted:
            raise MediaRejected("The PDF is encrypted, so Atrium cannot read it.")
        pages = len(reader.pages)
        if pages > MAX_PDF_PAGES:
            raise MediaRejected(f"The PDF has more than {MAX_PDF_PAGES:,} pages.")
        parts: list[str] = []
        used = 0
        truncated = False
        for index in range(min(pages, MAX_PAGES_READ)):
            text = reader.pages[index].extract_text() or ""
            if used + len(text) > budget:
                parts.append(text[: budget - used])
                truncated = True
                break
            parts.append(text)
            used += len(text)
        else:
            truncated = pages > MAX_PAGES_READ
    except LimitReachedError:
        raise MediaRejected(PDF_BOMB) from None
    except MediaRejected:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError, RecursionError) as exc:
        detail = str(exc).strip().rstrip(".")[:120]
        raise MediaRejected(
            "The PDF is damaged or incomplete" + (f" ({detail})." if detail else ".")
        ) from None
    facts = DocumentFacts(text="\n\n".join(parts).strip(), truncated=truncated, pages=pages)
    facts.thumbnail = _first_page_thumbnail(path) if pages else None
    return facts


def _first_page_thumbnail(path: Path) -> Derivative | None:
    """Page 1 rendered by PDFium, or None when it cannot be (never a rejection)."""
    import pypdfium2  # type: ignore[import-untyped]  # when a PDF is read (see read_pdf)

    try:
        document = pypdfium2.PdfDocument(str(path))
        try:
            page = document[0]
            width, height = page.get_size()  # points
            if width <= 0 or height <= 0:
                return None
            scale = THUMBNAIL_MAX / max(width, height)
            if width * scale * height * scale > MAX_RENDER_PIXELS:
                return None
            bitmap = page.render(scale=scale)
            derivative = encode_derivative(bitmap.to_pil(), THUMBNAIL_MAX)
            page.close()
            return derivative
        finally:
            document.close()
    except Exception:  # PDFium's errors are not typed; a PDF without a preview is fine
        log.info("no thumbnail for PDF %s", path.name, exc_info=True)
        return None
