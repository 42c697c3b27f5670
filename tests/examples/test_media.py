"""examples/media: every media content type decodes to a valid file of its declared type."""

from __future__ import annotations

import base64
import io
import struct
import wave
import zipfile
import zlib
from typing import Any

import pytest
from mcp import Client
from PIL import Image

from tests.examples.support import dump, http_server

SERVER = ("media",)
pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]


def block(result: Any, kind: str) -> Any:
    matches = [b for b in result.content if b.type == kind]
    assert len(matches) == 1, f"expected one {kind} block, got {[b.type for b in result.content]}"
    return matches[0]


def parse_avi(data: bytes) -> dict[str, Any]:
    """Walk an AVI's RIFF structure; fail on anything malformed."""
    assert data[:4] == b"RIFF" and data[8:12] == b"AVI "
    assert struct.unpack("<I", data[4:8])[0] == len(data) - 8
    info: dict[str, Any] = {"frames": [], "index": [], "junk": 0}

    def walk(start: int, end: int) -> None:
        pos = start
        while pos < end:
            fourcc, size = data[pos : pos + 4], struct.unpack("<I", data[pos + 4 : pos + 8])[0]
            body = pos + 8
            assert body + size <= end, f"chunk {fourcc!r} overruns its parent"
            if fourcc == b"LIST":
                kind = data[body : body + 4]
                if kind == b"movi":
                    info["movi"] = body
                walk(body + 4, body + size)
            elif fourcc == b"avih":
                fields = struct.unpack("<10I", data[body : body + 40])
                info["total_frames"], info["width"], info["height"] = (
                    fields[4],
                    fields[8],
                    fields[9],
                )
            elif fourcc == b"strh":
                info["stream"] = (data[body : body + 4], data[body + 4 : body + 8])
            elif fourcc == b"00dc":
                info["frames"].append((pos, data[body : body + size]))
            elif fourcc == b"idx1":
                for n in range(0, size, 16):
                    info["index"].append(struct.unpack("<4sIII", data[body + n : body + n + 16]))
            elif fourcc == b"JUNK":
                info["junk"] += size
            pos = body + size + (size % 2)

    walk(12, len(data))
    assert info["stream"] == (b"vids", b"MJPG")
    assert info["total_frames"] == len(info["frames"]) == len(info["index"])
    for (pos, frame), (ckid, _flags, offset, length) in zip(
        info["frames"], info["index"], strict=True
    ):
        assert ckid == b"00dc" and length == len(frame)
        assert info["movi"] + offset == pos, "idx1 offsets are relative to the 'movi' fourcc"
    return info


async def test_tools_are_read_only(module_client: Client) -> None:
    tools = {t.name: dump(t) for t in (await module_client.list_tools()).tools}
    assert set(tools) == {
        "get_image",
        "get_audio",
        "get_video",
        "get_blob",
        "get_resource_link",
        "get_large",
        "get_everything",
        "get_lying_file",
        "get_bomb",
    }
    for tool in tools.values():
        assert tool["annotations"]["readOnlyHint"] is True


@pytest.mark.parametrize(("fmt", "pil_format"), [("png", "PNG"), ("jpeg", "JPEG")])
async def test_get_image(module_client: Client, fmt: str, pil_format: str) -> None:
    result = await module_client.call_tool(
        "get_image", {"width": 321, "height": 123, "format": fmt}
    )
    image_block = block(result, "image")
    assert image_block.mime_type == f"image/{fmt}"
    image = Image.open(io.BytesIO(base64.b64decode(image_block.data)), formats=[pil_format])
    image.load()
    assert image.size == (321, 123)


async def test_get_image_rejects_absurd_sizes(module_client: Client) -> None:
    result = await module_client.call_tool("get_image", {"width": 100_000, "height": 10})
    assert result.is_error


async def test_get_audio_is_a_wav(module_client: Client) -> None:
    result = await module_client.call_tool("get_audio", {"seconds": 0.5, "frequency": 330})
    audio = block(result, "audio")
    assert audio.mime_type == "audio/wav"
    with wave.open(io.BytesIO(base64.b64decode(audio.data))) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 22050)
        assert wav.getnframes() == 11025
        assert any(wav.readframes(100))


async def test_get_video_is_an_mjpeg_avi(module_client: Client) -> None:
    result = await module_client.call_tool("get_video", {"seconds": 1, "fps": 6})
    resource = block(result, "resource").resource
    assert resource.mime_type == "video/x-msvideo"
    assert resource.meta == {"filename": "clip.avi"}
    data = base64.b64decode(resource.blob)
    info = parse_avi(data)
    assert len(info["frames"]) == 6 and (info["width"], info["height"]) == (320, 240)
    first = Image.open(io.BytesIO(info["frames"][0][1]), formats=["JPEG"])
    assert first.size == (320, 240)


async def test_get_blob(module_client: Client) -> None:
    result = await module_client.call_tool("get_blob", {"kilobytes": 3})
    resource = block(result, "resource").resource
    assert resource.mime_type == "application/octet-stream"
    assert resource.meta == {"filename": "sample-3k.bin"}
    assert resource.uri.endswith("/sample-3k.bin")
    assert len(base64.b64decode(resource.blob)) == 3 * 1024


@pytest.mark.parametrize(("kind", "mime"), [("image", "image/png"), ("audio", "audio/wav")])
async def test_resource_link_is_readable(module_client: Client, kind: str, mime: str) -> None:
    result = await module_client.call_tool("get_resource_link", {"kind": kind})
    link = block(result, "resource_link")
    assert link.mime_type == mime
    contents = (await module_client.read_resource(link.uri)).contents
    data = base64.b64decode(contents[0].blob)
    assert contents[0].mime_type == mime and len(data) == link.size
    if kind == "image":
        Image.open(io.BytesIO(data), formats=["PNG"]).load()
    else:
        with wave.open(io.BytesIO(data)) as wav:
            assert wav.getnframes() > 0


async def test_get_everything(module_client: Client) -> None:
    result = await module_client.call_tool("get_everything", {})
    assert [b.type for b in result.content] == ["text", "image", "audio", "resource_link"]
    Image.open(io.BytesIO(base64.b64decode(block(result, "image").data)), formats=["PNG"]).load()
    with wave.open(io.BytesIO(base64.b64decode(block(result, "audio").data))) as wav:
        assert wav.getnframes() > 0
    notes = await module_client.read_resource(block(result, "resource_link").uri)
    assert notes.contents[0].text.startswith("# Release notes")


@pytest.mark.parametrize("kind", ["video", "binary"])
async def test_get_large_has_the_exact_size(module_client: Client, kind: str) -> None:
    # 3 MiB here: the 50 MiB default works too but the stdio client reads long lines slowly.
    result = await module_client.call_tool("get_large", {"megabytes": 3, "kind": kind})
    resource = block(result, "resource").resource
    data = base64.b64decode(resource.blob)
    assert len(data) == 3 * 1024 * 1024
    if kind == "video":
        assert resource.mime_type == "video/x-msvideo"
        info = parse_avi(data)
        assert len(info["frames"]) > 5 and info["junk"] < 1024 * 1024
        Image.open(io.BytesIO(info["frames"][-1][1]), formats=["JPEG"]).load()
    else:
        assert resource.mime_type == "application/octet-stream"


@pytest.mark.parametrize("as_block", ["image", "resource"])
async def test_lying_file_is_a_zip(module_client: Client, as_block: str) -> None:
    result = await module_client.call_tool("get_lying_file", {"block": as_block})
    if as_block == "image":
        image_block = block(result, "image")
        mime, data = image_block.mime_type, base64.b64decode(image_block.data)
    else:
        resource = block(result, "resource").resource
        mime, data = resource.mime_type, base64.b64decode(resource.blob)
    assert mime == "image/png"
    assert data[:4] == b"PK\x03\x04"
    assert "readme.txt" in zipfile.ZipFile(io.BytesIO(data)).namelist()
    with pytest.raises(Image.UnidentifiedImageError):
        Image.open(io.BytesIO(data))


async def test_bomb_is_small_valid_and_refused_by_pillow(module_client: Client) -> None:
    result = await module_client.call_tool("get_bomb", {})
    image_block = block(result, "image")
    data = base64.b64decode(image_block.data)
    assert image_block.mime_type == "image/png" and len(data) < 400_000
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (50_000, 50_000)
    with pytest.raises(Image.DecompressionBombError):
        Image.open(io.BytesIO(data))

    # The stream is genuine: it inflates, checksum included, to every scanline.
    length = struct.unpack(">I", data[33:37])[0]
    idat = data[41 : 41 + length]
    inflater = zlib.decompressobj()
    total = 0
    for start in range(0, len(idat), 1 << 16):
        piece = idat[start : start + (1 << 16)]
        while piece:
            total += len(inflater.decompress(piece, 1 << 24))
            piece = inflater.unconsumed_tail
    total += len(inflater.flush())
    assert inflater.eof
    assert total == 50_000 * (1 + 50_000 // 8)


async def test_get_large_default_is_50_mib_over_http() -> None:
    with http_server("media") as url:
        async with Client(url, cache=None) as client:
            result = await client.call_tool("get_large", {})
    resource = block(result, "resource").resource
    data = base64.b64decode(resource.blob)
    assert len(data) == 50 * 1024 * 1024
    assert resource.uri == "media://video/large-50mb.avi"
    assert len(parse_avi(data)["frames"]) > 100
