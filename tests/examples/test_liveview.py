"""examples/liveview: the view, its CSP, the MJPEG stream and the app-only controls."""

from __future__ import annotations

import io
import time
from collections.abc import Callable

import httpx
import pytest
from mcp import Client
from PIL import Image

from tests.examples.support import APP_MIME, dump, free_port, stdio_client

STREAM_PORT = free_port()
ORIGIN = f"http://127.0.0.1:{STREAM_PORT}"
SERVER = ("liveview", "--stream-port", str(STREAM_PORT))
pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

# Background colours of the modes (the corner pixel of every frame), see PALETTES.
CALM = (18, 92, 110)
CHAOS = (150, 28, 74)


class MjpegReader:
    """Splits a multipart/x-mixed-replace body into JPEG parts."""

    def __init__(self) -> None:
        self.buffer = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        self.buffer += chunk
        frames = []
        while True:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return frames
            headers = self.buffer[:head_end].decode("ascii", "replace").lower()
            assert "--frame" in headers and "content-type: image/jpeg" in headers
            length = int(headers.split("content-length:")[1].split("\r\n")[0])
            end = head_end + 4 + length
            if len(self.buffer) < end + 2:
                return frames
            frames.append(self.buffer[head_end + 4 : end])
            self.buffer = self.buffer[end + 2 :]


def corner(jpeg: bytes) -> tuple[int, int, int]:
    image = Image.open(io.BytesIO(jpeg), formats=["JPEG"])
    return image.convert("RGB").getpixel((2, 2))


def close_to(colour: tuple[int, int, int], expected: tuple[int, int, int]) -> bool:
    return all(abs(a - b) <= 16 for a, b in zip(colour, expected, strict=True))


async def read_frames(
    seconds: float, stop_when: Callable[[bytes], bool] | None = None
) -> list[bytes]:
    frames: list[bytes] = []
    reader = MjpegReader()
    async with (
        httpx.AsyncClient(timeout=5) as http,
        http.stream("GET", f"{ORIGIN}/stream.mjpeg") as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"] == "multipart/x-mixed-replace; boundary=frame"
        deadline = time.monotonic() + seconds
        async for chunk in response.aiter_bytes():
            frames.extend(reader.feed(chunk))
            if time.monotonic() > deadline or (stop_when and frames and stop_when(frames[-1])):
                break
    return frames


async def test_tools_and_visibility(module_client: Client) -> None:
    tools = {t.name: dump(t) for t in (await module_client.list_tools()).tools}
    assert set(tools) == {"open_live_view", "set_mode", "pause", "resume"}
    assert tools["open_live_view"]["_meta"]["ui"] == {
        "resourceUri": "ui://liveview/app",
        "visibility": ["model", "app"],
    }
    for name in ("set_mode", "pause", "resume"):
        assert tools[name]["_meta"]["ui"]["visibility"] == ["app"]
        assert tools[name]["annotations"]["idempotentHint"] is True
    assert tools["set_mode"]["inputSchema"]["properties"]["mode"]["enum"] == [
        "calm",
        "chaos",
        "night",
    ]


async def test_resource_declares_exactly_the_stream_origin(module_client: Client) -> None:
    item = dump((await module_client.read_resource("ui://liveview/app")).contents[0])
    assert item["mimeType"] == APP_MIME
    assert item["_meta"]["ui"]["csp"] == {"resourceDomains": [ORIGIN]}
    assert f'<img id="stream" src="{ORIGIN}/stream.mjpeg"' in item["text"]
    opened = await module_client.call_tool("open_live_view", {})
    assert opened.structured_content["streamUrl"] == f"{ORIGIN}/stream.mjpeg"
    assert f"{ORIGIN}/stream.mjpeg" in opened.content[0].text


async def test_stream_delivers_frames_and_follows_the_mode(module_client: Client) -> None:
    await module_client.call_tool("set_mode", {"mode": "calm"})
    frames = await read_frames(1.5)
    assert len(frames) >= 10, f"only {len(frames)} frames in 1.5 s"
    assert all(f.startswith(b"\xff\xd8") and f.endswith(b"\xff\xd9") for f in frames)
    assert close_to(corner(frames[-1]), CALM)
    assert Image.open(io.BytesIO(frames[-1])).size == (480, 270)

    result = await module_client.call_tool("set_mode", {"mode": "chaos"})
    assert result.structured_content["mode"] == "chaos"
    chaos = await read_frames(2.0, stop_when=lambda f: close_to(corner(f), CHAOS))
    assert close_to(corner(chaos[-1]), CHAOS), corner(chaos[-1])

    again = await module_client.call_tool("set_mode", {"mode": "chaos"})
    assert "Already in chaos mode" in again.content[0].text


async def test_pause_and_resume(module_client: Client) -> None:
    paused = await module_client.call_tool("pause", {})
    assert paused.structured_content["paused"] is True
    frames = await read_frames(0.6)
    # Paused: the scene stands still (only JPEG noise could differ, and it does not).
    assert len(frames) >= 2 and frames[-1] == frames[-2]
    resumed = await module_client.call_tool("resume", {})
    assert resumed.structured_content["paused"] is False
    moving = await read_frames(0.6)
    assert moving[-1] != moving[-2]


async def test_stream_server_stops_with_the_process() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/stream.mjpeg"
    async with httpx.AsyncClient(timeout=5) as http:
        client = stdio_client("liveview", "--stream-port", str(port))
        async with client:
            await client.call_tool("open_live_view", {})
            stream = http.stream("GET", url)
            response = await stream.__aenter__()
            chunks = response.aiter_bytes()
            assert await anext(chunks)
            closing_started = time.monotonic()
        # The client closes stdin, then waits 2 s before killing: exiting sooner means the
        # server stopped on its own although a viewer still held the stream open.
        assert time.monotonic() - closing_started < 1.9
        try:
            with pytest.raises(httpx.HTTPError):
                async for _ in chunks:
                    pass
                raise httpx.ReadError("the stream ended cleanly")
        finally:
            await stream.__aexit__(None, None, None)
        with pytest.raises(httpx.ConnectError):
            await http.get(url)
