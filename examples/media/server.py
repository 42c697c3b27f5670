"""Media: tools that return every kind of MCP media content, plus hostile files for host tests.

Run over stdio (default), streamable HTTP or SSE:

    python examples/media/server.py
    python examples/media/server.py --http --host 127.0.0.1 --port 8102   # http://127.0.0.1:8102/mcp
    python examples/media/server.py --sse --port 8102

Everything is generated in-process (Pillow, `wave`, `zlib`, `zipfile`); nothing is downloaded.
Video is Motion-JPEG in an AVI container (`video/x-msvideo`): it can be written correctly in
pure Python, and a host can take a poster frame from it with Pillow alone (each frame is a
JPEG). Browsers do not play AVI inline; hosts offer it as a download with that poster.
"""

from __future__ import annotations

import argparse
import base64
import colorsys
import functools
import io
import math
import struct
import wave
import zipfile
import zlib
from array import array
from typing import Annotated, Final, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    ToolAnnotations,
)
from PIL import Image, ImageDraw, ImageFont
from pydantic import Field

DEFAULT_HTTP_PORT: Final = 8102
MIB: Final = 1024 * 1024
AVI_MIME: Final = "video/x-msvideo"
READ_ONLY: Final = ToolAnnotations(read_only_hint=True, open_world_hint=False)

mcp = MCPServer(
    "media",
    title="Media samples",
    version="1.0.0",
    instructions=(
        "Returns generated images, audio, video, binary files and resource links. "
        "get_lying_file and get_bomb return deliberately hostile files for testing hosts."
    ),
)


# --------------------------------------------------------------------------------------------
# Generators
# --------------------------------------------------------------------------------------------


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def render_picture(width: int, height: int, label: str, hue: float = 0.62) -> Image.Image:
    """A landscape-ish illustration: sky gradient, sun, two hill layers and a caption."""
    sky_top = tuple(round(c * 255) for c in colorsys.hls_to_rgb(hue, 0.30, 0.55))
    sky_bottom = tuple(round(c * 255) for c in colorsys.hls_to_rgb((hue + 0.08) % 1, 0.78, 0.75))
    gradient = Image.linear_gradient("L").resize((width, height))
    image = Image.composite(
        Image.new("RGB", (width, height), sky_bottom),
        Image.new("RGB", (width, height), sky_top),
        gradient,
    )
    draw = ImageDraw.Draw(image)
    unit = min(width, height)
    sun_r = max(2, unit // 9)
    sun_x, sun_y = int(width * 0.72), int(height * 0.38)
    draw.ellipse((sun_x - sun_r, sun_y - sun_r, sun_x + sun_r, sun_y + sun_r), fill=(255, 214, 120))
    for layer, (lightness, amplitude, base) in enumerate(((0.42, 0.10, 0.70), (0.28, 0.07, 0.82))):
        colour = tuple(
            round(c * 255) for c in colorsys.hls_to_rgb((hue + 0.72) % 1, lightness, 0.40)
        )
        points = [(0, height)]
        for x in range(0, width + 8, 8):
            wave_y = math.sin(x / max(width, 1) * math.pi * (2 + layer) + layer * 1.7)
            points.append((x, int(height * (base - amplitude * wave_y))))
        points.append((width, height))
        draw.polygon(points, fill=colour)
    if unit >= 48:
        font = _font(max(10, unit // 12))
        box = draw.textbbox((0, 0), label, font=font)
        pad = max(4, unit // 40)
        x, y = pad * 2, pad * 2
        draw.rounded_rectangle(
            (x - pad, y - pad, x + box[2] - box[0] + pad, y + box[3] - box[1] + pad * 1.5),
            radius=pad,
            fill=(15, 18, 26),
        )
        draw.text((x - box[0], y - box[1] + pad // 2), label, font=font, fill=(255, 255, 255))
    return image


def encode_image(image: Image.Image, fmt: Literal["png", "jpeg"]) -> bytes:
    buffer = io.BytesIO()
    if fmt == "png":
        image.save(buffer, format="PNG", optimize=True)
    else:
        image.save(buffer, format="JPEG", quality=88)
    return buffer.getvalue()


def render_tone(seconds: float, frequency: float, sample_rate: int = 22050) -> bytes:
    """A mono 16-bit WAV: the tone plus a soft fifth, with 20 ms fades to avoid clicks."""
    frames = max(1, int(seconds * sample_rate))
    fade = min(frames // 2, int(0.02 * sample_rate))
    samples = array("h")
    for n in range(frames):
        t = n / sample_rate
        envelope = min(1.0, n / fade, (frames - n) / fade) if fade else 1.0
        value = 0.55 * math.sin(2 * math.pi * frequency * t) + 0.2 * math.sin(
            2 * math.pi * frequency * 1.5 * t
        )
        samples.append(int(32767 * 0.8 * envelope * value))
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(sample_rate)
        wav.writeframes(samples.tobytes())
    return buffer.getvalue()


def _chunk(fourcc: bytes, data: bytes) -> bytes:
    """A RIFF chunk; odd-sized data gets the pad byte RIFF requires."""
    return fourcc + struct.pack("<I", len(data)) + data + (b"\0" if len(data) % 2 else b"")


def _list(kind: bytes, payload: bytes) -> bytes:
    return b"LIST" + struct.pack("<I", len(payload) + 4) + kind + payload


def build_avi(
    frames: list[bytes], width: int, height: int, fps: int, pad_to: int | None = None
) -> bytes:
    """An AVI 1.0 file with one Motion-JPEG video stream and an idx1 index.

    `pad_to` appends a JUNK chunk (ignored by every reader) so the file is exactly that many
    bytes; it must leave room for the chunk header (8 bytes).
    """
    max_frame = max(len(f) for f in frames)
    avih = struct.pack(
        "<10I4I",
        round(1_000_000 / fps),  # microseconds per frame
        max_frame * fps,  # max bytes per second
        0,  # padding granularity
        0x10,  # AVIF_HASINDEX
        len(frames),
        0,  # initial frames
        1,  # streams
        max_frame,  # suggested buffer size
        width,
        height,
        0,
        0,
        0,
        0,
    )
    strh = struct.pack(
        "<4s4sIHHIIIIIIIIhhhh",
        b"vids",
        b"MJPG",
        0,  # flags
        0,  # priority
        0,  # language
        0,  # initial frames
        1,  # scale
        fps,  # rate: rate / scale = frames per second
        0,  # start
        len(frames),  # length in frames
        max_frame,
        0xFFFFFFFF,  # quality: default
        0,  # sample size: varies
        0,
        0,
        width,
        height,
    )
    strf = struct.pack(
        "<IiiHH4sIiiII", 40, width, height, 1, 24, b"MJPG", width * height * 3, 0, 0, 0, 0
    )
    header = _list(
        b"hdrl",
        _chunk(b"avih", avih) + _list(b"strl", _chunk(b"strh", strh) + _chunk(b"strf", strf)),
    )
    movi_parts: list[bytes] = []
    index = bytearray()
    offset = 4  # idx1 offsets count from the 'movi' fourcc
    for frame in frames:
        chunk = _chunk(b"00dc", frame)
        index += struct.pack("<4sIII", b"00dc", 0x10, offset, len(frame))  # AVIIF_KEYFRAME
        movi_parts.append(chunk)
        offset += len(chunk)
    body = b"AVI " + header + _list(b"movi", b"".join(movi_parts)) + _chunk(b"idx1", bytes(index))
    if pad_to is not None:
        junk = pad_to - 8 - len(body) - 8
        if junk < 0:
            raise ValueError("pad_to is smaller than the file itself")
        body += _chunk(b"JUNK", b"\0" * junk)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def render_frames(count: int, width: int, height: int, quality: int = 80) -> list[bytes]:
    """JPEG frames of a ball travelling across the picture, for the AVI."""
    frames = []
    for n in range(count):
        hue = (0.55 + n / max(count, 1) * 0.3) % 1
        image = render_picture(width, height, f"frame {n + 1}/{count}", hue=hue)
        draw = ImageDraw.Draw(image)
        radius = max(4, min(width, height) // 10)
        x = int(radius + (width - 2 * radius) * (n / max(count - 1, 1)))
        y = int(height * 0.55 - abs(math.sin(n / 3)) * height * 0.3)
        draw.ellipse((x - radius, y - radius, x + radius, y + radius), fill=(250, 82, 82))
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=quality)
        frames.append(buffer.getvalue())
    return frames


@functools.lru_cache(maxsize=2)
def noisy_frames(count: int, width: int, height: int) -> tuple[bytes, ...]:
    """High-entropy frames (big JPEGs) used to fill large videos quickly."""
    frames = []
    for n in range(count):
        noise = Image.effect_noise((width, height), 96).convert("RGB")
        picture = render_picture(width, height, f"large payload · frame {n + 1}", hue=n / count)
        image = Image.blend(picture, noise, 0.35)
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=95)
        frames.append(buffer.getvalue())
    return tuple(frames)


def build_large_avi(size: int) -> bytes:
    """An MJPEG AVI of exactly `size` bytes: real frames repeated, then a JUNK pad chunk."""
    unique = noisy_frames(24, 640, 360)
    frames: list[bytes] = []
    overhead = 512 + 8  # headers + JUNK chunk header, generously
    used = overhead
    while True:
        frame = unique[len(frames) % len(unique)]
        cost = len(frame) + (len(frame) % 2) + 8 + 16  # chunk + index entry
        if frames and used + cost > size:
            break
        frames.append(frame)
        used += cost
    return build_avi(frames, 640, 360, fps=24, pad_to=size)


@functools.lru_cache(maxsize=4)
def build_png_bomb(side: int) -> bytes:
    """A valid 1-bit greyscale PNG of side x side pixels, all black, compressed to ~KBs.

    50000 x 50000 inflates to ~312 MB of scanlines and 2.5 gigapixels (7.5 GB as RGB). Rather
    than deflating all of it, compress one block of rows after a full flush (which resets the
    compressor's history), so every further block encodes to the same bytes and can be repeated;
    the Adler-32 trailer is then computed for the whole stream.
    """
    row = b"\0" * (1 + (side + 7) // 8)  # filter byte + packed pixels
    rows_per_block = min(1000, side)
    blocks, remainder = divmod(side, rows_per_block)
    block = row * rows_per_block
    compressor = zlib.compressobj(9)
    first = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)  # zlib header + block
    repeat = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    tail = compressor.compress(row * remainder) + compressor.flush(zlib.Z_FINISH)
    adler = 1
    for _ in range(blocks):
        adler = zlib.adler32(block, adler)
    adler = zlib.adler32(row * remainder, adler)
    # The tail's own checksum covers only what this compressor saw: replace it.
    idat = first + repeat * (blocks - 1) + tail[:-4] + struct.pack(">I", adler)
    ihdr = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", ihdr)
        + _png_chunk(b"IDAT", idat)
        + _png_chunk(b"IEND", b"")
    )


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def build_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("readme.txt", "This is a ZIP archive pretending to be a PNG image.\n")
        archive.writestr("payload/data.csv", "id,value\n1,42\n2,43\n")
    return buffer.getvalue()


def sample_bytes(size: int) -> bytes:
    """Deterministic binary data with a small header, so it reads as a plausible file."""
    header = b"ATRMBLOB" + struct.pack("<I", size)
    block = bytes((n * 73 + 41) % 256 for n in range(4096))
    body = (block * (size // len(block) + 1))[: max(0, size - len(header))]
    return (header + body)[:size]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def text(value: str) -> TextContent:
    return TextContent(type="text", text=value)


# --------------------------------------------------------------------------------------------
# Resources (targets of get_resource_link)
# --------------------------------------------------------------------------------------------

SAMPLE_NOTES = """# Release notes

- Dark mode for the composer
- Faster thread loading
- Tool views now remember their state
"""


@functools.lru_cache(maxsize=1)
def sample_png() -> bytes:
    return encode_image(render_picture(800, 450, "landscape.png"), "png")


@functools.lru_cache(maxsize=1)
def sample_wav() -> bytes:
    return render_tone(1.0, 523.25)


@mcp.resource(
    "media://samples/landscape.png",
    name="landscape.png",
    title="Landscape",
    description="An 800x450 PNG illustration.",
    mime_type="image/png",
)
def landscape_resource() -> bytes:
    return sample_png()


@mcp.resource(
    "media://samples/chime.wav",
    name="chime.wav",
    title="Chime",
    description="A one-second WAV chime.",
    mime_type="audio/wav",
)
def chime_resource() -> bytes:
    return sample_wav()


@mcp.resource(
    "media://samples/notes.md",
    name="notes.md",
    title="Release notes",
    description="A short Markdown document.",
    mime_type="text/markdown",
)
def notes_resource() -> str:
    return SAMPLE_NOTES


LINKABLE: Final = {
    "image": (
        "media://samples/landscape.png",
        "landscape.png",
        "Landscape",
        "image/png",
        sample_png,
    ),
    "audio": ("media://samples/chime.wav", "chime.wav", "Chime", "audio/wav", sample_wav),
    "text": (
        "media://samples/notes.md",
        "notes.md",
        "Release notes",
        "text/markdown",
        lambda: SAMPLE_NOTES.encode(),
    ),
}


def resource_link(kind: Literal["image", "audio", "text"]) -> ResourceLink:
    uri, name, title, mime, produce = LINKABLE[kind]
    return ResourceLink(
        type="resource_link",
        uri=uri,
        name=name,
        title=title,
        mime_type=mime,
        size=len(produce()),
        description=f"{title} ({mime}), readable with resources/read",
    )


# --------------------------------------------------------------------------------------------
# Tools
# --------------------------------------------------------------------------------------------


@mcp.tool(title="Get an image", annotations=READ_ONLY)
def get_image(
    width: Annotated[int, Field(ge=1, le=4096, description="Width in pixels")] = 640,
    height: Annotated[int, Field(ge=1, le=4096, description="Height in pixels")] = 360,
    format: Annotated[Literal["png", "jpeg"], Field(description="Image format")] = "png",
) -> CallToolResult:
    """Generate an illustration of the given size as PNG (default) or JPEG."""
    label = f"{width} x {height} {format.upper()}"
    data = encode_image(render_picture(width, height, label), format)
    return CallToolResult(
        content=[
            text(
                f"A generated {width}x{height} {format.upper()} illustration ({len(data)} bytes)."
            ),
            ImageContent(type="image", data=b64(data), mime_type=f"image/{format}"),
        ]
    )


@mcp.tool(title="Get an audio clip", annotations=READ_ONLY)
def get_audio(
    seconds: Annotated[float, Field(gt=0, le=30, description="Duration in seconds")] = 1.5,
    frequency: Annotated[float, Field(ge=50, le=4000, description="Tone in Hz")] = 440.0,
) -> CallToolResult:
    """Generate a short WAV tone (mono, 16-bit, 22.05 kHz)."""
    data = render_tone(seconds, frequency)
    return CallToolResult(
        content=[
            text(f"A {seconds:g} s WAV tone at {frequency:g} Hz ({len(data)} bytes)."),
            AudioContent(type="audio", data=b64(data), mime_type="audio/wav"),
        ]
    )


@mcp.tool(title="Get a video clip", annotations=READ_ONLY)
def get_video(
    seconds: Annotated[float, Field(gt=0, le=10, description="Duration in seconds")] = 2.0,
    fps: Annotated[int, Field(ge=1, le=30, description="Frames per second")] = 12,
    width: Annotated[int, Field(ge=16, le=1280, description="Width in pixels")] = 320,
    height: Annotated[int, Field(ge=16, le=720, description="Height in pixels")] = 240,
) -> CallToolResult:
    """Generate a short Motion-JPEG AVI clip (video/x-msvideo) of a bouncing ball."""
    count = max(1, round(seconds * fps))
    data = build_avi(render_frames(count, width, height), width, height, fps)
    return CallToolResult(
        content=[
            text(f"A {count}-frame {width}x{height} MJPEG AVI at {fps} fps ({len(data)} bytes)."),
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(
                    uri="media://video/clip.avi",
                    mime_type=AVI_MIME,
                    blob=b64(data),
                    _meta={"filename": "clip.avi"},
                ),
            ),
        ]
    )


@mcp.tool(title="Get a binary file", annotations=READ_ONLY)
def get_blob(
    kilobytes: Annotated[int, Field(ge=1, le=10240, description="Size in KiB")] = 16,
) -> CallToolResult:
    """Return an application/octet-stream file as an embedded resource."""
    filename = f"sample-{kilobytes}k.bin"
    data = sample_bytes(kilobytes * 1024)
    return CallToolResult(
        content=[
            text(f"A {kilobytes} KiB binary file named {filename}."),
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(
                    uri=f"media://files/{filename}",
                    mime_type="application/octet-stream",
                    blob=b64(data),
                    _meta={"filename": filename},
                ),
            ),
        ]
    )


@mcp.tool(title="Get a resource link", annotations=READ_ONLY)
def get_resource_link(
    kind: Annotated[
        Literal["image", "audio", "text"], Field(description="What to link to")
    ] = "image",
) -> CallToolResult:
    """Return a resource_link to a file this server serves (read it with resources/read)."""
    link = resource_link(kind)
    return CallToolResult(content=[text(f"Here is a link to {link.name}."), link])


@mcp.tool(title="Get a large payload", annotations=READ_ONLY)
def get_large(
    megabytes: Annotated[float, Field(gt=0, le=200, description="Size in MiB")] = 50,
    kind: Annotated[Literal["video", "binary"], Field(description="Payload type")] = "video",
) -> CallToolResult:
    """Return a payload of exactly `megabytes` MiB: an MJPEG AVI (default) or binary data."""
    size = int(megabytes * MIB) // 2 * 2  # RIFF chunks are word-aligned
    label = f"{megabytes:g}mb"
    if kind == "video":
        data = build_large_avi(max(size, 64 * 1024))
        uri, mime, filename = f"media://video/large-{label}.avi", AVI_MIME, f"large-{label}.avi"
    else:
        data = sample_bytes(size)
        uri, mime = f"media://files/large-{label}.bin", "application/octet-stream"
        filename = f"large-{label}.bin"
    return CallToolResult(
        content=[
            text(f"A {len(data)} byte {mime} payload ({filename})."),
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(
                    uri=uri, mime_type=mime, blob=b64(data), _meta={"filename": filename}
                ),
            ),
        ]
    )


@mcp.tool(title="Get one of everything", annotations=READ_ONLY)
def get_everything() -> CallToolResult:
    """Return text, an image, an audio clip and a resource link in one result."""
    blocks: list[ContentBlock] = [
        text("Here is one of everything: an image, a short chime and a link to release notes."),
        ImageContent(
            type="image",
            data=b64(encode_image(render_picture(480, 270, "everything"), "png")),
            mime_type="image/png",
        ),
        AudioContent(type="audio", data=b64(render_tone(0.8, 659.25)), mime_type="audio/wav"),
        resource_link("text"),
    ]
    return CallToolResult(content=blocks)


@mcp.tool(title="Get a mislabelled file", annotations=READ_ONLY)
def get_lying_file(
    block: Annotated[
        Literal["image", "resource"],
        Field(description="Send it as an image block or as an embedded resource"),
    ] = "image",
) -> CallToolResult:
    """Return a ZIP archive that claims to be image/png (for testing a host's type checks)."""
    data = build_zip()
    lie: ContentBlock
    if block == "image":
        lie = ImageContent(type="image", data=b64(data), mime_type="image/png")
    else:
        lie = EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(
                uri="media://files/photo.png",
                mime_type="image/png",
                blob=b64(data),
                _meta={"filename": "photo.png"},
            ),
        )
    return CallToolResult(content=[text("Here is a photo."), lie])


@mcp.tool(title="Get a decompression bomb", annotations=READ_ONLY)
def get_bomb(
    side: Annotated[int, Field(ge=1000, le=100_000, description="Width and height")] = 50_000,
) -> CallToolResult:
    """Return a tiny PNG that declares side x side pixels (a decompression bomb)."""
    data = build_png_bomb(side)
    return CallToolResult(
        content=[
            text(f"A {side}x{side} PNG in {len(data)} bytes."),
            ImageContent(type="image", data=b64(data), mime_type="image/png"),
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Media samples MCP server.")
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
