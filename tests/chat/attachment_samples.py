"""Files to attach in tests, made here (no fixtures on disk): PNG/JPEG pictures, a PDF
with real text, a PDF whose page content inflates past pypdf's limit, an image whose
header declares a decompression bomb."""

from __future__ import annotations

import io
import struct
import zlib

from PIL import Image, ImageDraw


def png(width: int = 640, height: int = 400, color: tuple[int, int, int] = (94, 92, 230)) -> bytes:
    image = Image.new("RGB", (width, height), color)
    draw = ImageDraw.Draw(image)
    draw.rectangle((width // 8, height // 8, width // 2, height // 2), fill=(250, 200, 40))
    draw.ellipse((width // 2, height // 3, width - 20, height - 20), fill=(22, 135, 90))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _pdf(objects: list[bytes]) -> bytes:
    """A PDF of the given objects (1-based), with a correct xref table."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


def _page_objects(content: bytes, *, compressed: bool = False) -> list[bytes]:
    stream = zlib.compress(content) if compressed else content
    filters = b" /Filter /FlateDecode" if compressed else b""
    return [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d%s >>\nstream\n" % (len(stream), filters) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]


def pdf_with_text(*lines: str) -> bytes:
    ops = [b"BT /F1 28 Tf 72 700 Td 34 TL"]
    for line in lines:
        ops.append(b"(" + line.encode("latin-1") + b") Tj T*")
    ops.append(b"ET 0.37 0.36 0.9 rg 72 420 468 160 re f")
    return _pdf(_page_objects(b"\n".join(ops)))


def pdf_bomb(megabytes: int = 120) -> bytes:
    """One page whose content stream inflates to ``megabytes`` MB of spaces (~120 KB)."""
    content = b"BT /F1 12 Tf 72 700 Td (boom) Tj ET\n" + b" " * (megabytes * 1024 * 1024)
    return _pdf(_page_objects(content, compressed=True))


def png_bomb(side: int = 50_000) -> bytes:
    """A PNG whose header declares side × side pixels (the body is a few bytes)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    body = zlib.compress(b"\x00" * 1024)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body) + chunk(b"IEND", b"")
    )


ZIP = b"PK\x03\x04" + b"\x00" * 200
ELF = b"\x7fELF" + b"\x00" * 200
