"""Live view: an MCP App showing a live MJPEG "game" stream served by this same process.

Run over stdio (default), streamable HTTP or SSE:

    python examples/liveview/server.py                        # stream on http://127.0.0.1:8765
    python examples/liveview/server.py --stream-port 9000
    python examples/liveview/server.py --http --host 127.0.0.1 --port 8103   # MCP at :8103/mcp

The stream (`multipart/x-mixed-replace`, ~15 fps, frames drawn with Pillow) is served by a
small threaded HTTP server inside the process, on `--stream-port` / `LIVEVIEW_STREAM_PORT`
(default 8765) in every transport mode; its threads are daemons, so it stops with the process.
If that port is taken the server falls back to a free port (with a warning on stderr); the
view's HTML and its CSP always name the port actually bound.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import random
import sys
import threading
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from mcp.server.apps import Apps, ResourceCsp
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from PIL import Image, ImageDraw, ImageFont
from pydantic import Field

APP_URI: Final = "ui://liveview/app"
APP_HTML_PATH: Final = Path(__file__).with_name("app.html")
STREAM_URL_PLACEHOLDER: Final = "__STREAM_URL__"
DEFAULT_HTTP_PORT: Final = 8103
DEFAULT_STREAM_PORT: Final = 8765
FPS: Final = 15
WIDTH, HEIGHT = 480, 270
BOUNDARY: Final = "frame"

Mode = Literal["calm", "chaos", "night"]


@dataclass(frozen=True)
class Palette:
    background: tuple[int, int, int]
    grid: tuple[int, int, int]
    ball: tuple[int, int, int]
    paddle: tuple[int, int, int]
    hud: tuple[int, int, int]
    speed: float  # pixels per second
    balls: int


# The corner pixel of every frame is the palette background: tests (and hosts) can tell the
# modes apart by colour alone.
PALETTES: Final[dict[str, Palette]] = {
    "calm": Palette(
        background=(18, 92, 110),
        grid=(28, 108, 126),
        ball=(255, 236, 179),
        paddle=(236, 250, 248),
        hud=(8, 52, 64),
        speed=150,
        balls=1,
    ),
    "chaos": Palette(
        background=(150, 28, 74),
        grid=(170, 44, 92),
        ball=(255, 214, 10),
        paddle=(255, 255, 255),
        hud=(80, 8, 36),
        speed=330,
        balls=3,
    ),
    "night": Palette(
        background=(10, 14, 32),
        grid=(20, 26, 52),
        ball=(190, 210, 255),
        paddle=(120, 140, 200),
        hud=(4, 6, 16),
        speed=190,
        balls=1,
    ),
}


@dataclass
class Ball:
    x: float
    y: float
    vx: float
    vy: float


@dataclass
class Game:
    """A self-playing paddle game. Every public method is called with `lock` held by callers."""

    mode: Mode = "calm"
    paused: bool = False
    score: int = 0
    misses: int = 0
    paddle_x: float = WIDTH / 2
    balls: list[Ball] = field(default_factory=list)
    stars: list[tuple[int, int, float]] = field(default_factory=list)
    clock: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    rng: random.Random = field(default_factory=lambda: random.Random(7))

    def __post_init__(self) -> None:
        self.stars = [
            (self.rng.randrange(WIDTH), self.rng.randrange(HEIGHT - 40), self.rng.random() * 6)
            for _ in range(60)
        ]
        self._reset_balls()

    def _reset_balls(self) -> None:
        palette = PALETTES[self.mode]
        self.balls = []
        for n in range(palette.balls):
            angle = self.rng.uniform(0.6, 1.2) + n * 0.7
            self.balls.append(
                Ball(
                    x=WIDTH * (0.3 + 0.2 * n),
                    y=HEIGHT * 0.3,
                    vx=palette.speed * math.cos(angle) * self.rng.choice((-1, 1)),
                    vy=palette.speed * math.sin(angle),
                )
            )

    def set_mode(self, mode: Mode) -> bool:
        if mode == self.mode:
            return False
        self.mode = mode
        self._reset_balls()
        return True

    def step(self, dt: float) -> None:
        if self.paused:
            return
        self.clock += dt
        radius = 9
        paddle_y = HEIGHT - 24
        # The paddle chases the lowest incoming ball, a little slower than the ball.
        target = max(self.balls, key=lambda b: b.y if b.vy > 0 else -1).x
        reach = PALETTES[self.mode].speed * 1.1 * dt
        self.paddle_x += max(-reach, min(reach, target - self.paddle_x))
        for ball in self.balls:
            ball.x += ball.vx * dt
            ball.y += ball.vy * dt
            if ball.x < radius or ball.x > WIDTH - radius:
                ball.vx = -ball.vx
                ball.x = min(max(ball.x, radius), WIDTH - radius)
            if ball.y < 40 + radius:
                ball.vy = abs(ball.vy)
            if ball.vy > 0 and ball.y >= paddle_y - radius:
                if ball.y <= paddle_y + 4 and abs(ball.x - self.paddle_x) <= 44:
                    ball.vy = -abs(ball.vy)
                    ball.y = paddle_y - radius
                    self.score += 1
                elif ball.y > HEIGHT + radius:
                    self.misses += 1
                    ball.x, ball.y = self.rng.uniform(60, WIDTH - 60), 60.0
                    ball.vy = abs(ball.vy)

    def render(self, fonts: dict[str, ImageFont.FreeTypeFont | ImageFont.ImageFont]) -> Image.Image:
        palette = PALETTES[self.mode]
        image = Image.new("RGB", (WIDTH, HEIGHT), palette.background)
        draw = ImageDraw.Draw(image)
        if self.mode == "night":
            for x, y, phase in self.stars:
                glow = int(120 + 120 * (0.5 + 0.5 * math.sin(self.clock * 2 + phase)))
                draw.point((x, y), fill=(glow, glow, min(255, glow + 30)))
        else:
            for x in range(24, WIDTH, 32):
                draw.line((x, 40, x, HEIGHT), fill=palette.grid)
            for y in range(56, HEIGHT, 32):
                draw.line((8, y, WIDTH - 8, y), fill=palette.grid)
        # HUD band
        draw.rounded_rectangle((8, 8, WIDTH - 8, 34), radius=9, fill=palette.hud)
        draw.text((20, 13), f"SCORE {self.score:03d}", font=fonts["hud"], fill=(255, 255, 255))
        draw.text(
            (WIDTH // 2, 21), self.mode.upper(), font=fonts["hud"], fill=palette.ball, anchor="mm"
        )
        elapsed = int(self.clock)
        draw.text(
            (WIDTH - 20, 21),
            f"{elapsed // 60:02d}:{elapsed % 60:02d}",
            font=fonts["hud"],
            fill=(255, 255, 255),
            anchor="rm",
        )
        # Paddle and balls
        paddle_y = HEIGHT - 24
        draw.rounded_rectangle(
            (self.paddle_x - 44, paddle_y, self.paddle_x + 44, paddle_y + 8),
            radius=4,
            fill=palette.paddle,
        )
        for n, ball in enumerate(self.balls):
            colour = palette.ball
            if self.mode == "chaos":
                hue_shift = int(80 * math.sin(self.clock * 9 + n))
                colour = (255, max(0, min(255, 180 + hue_shift)), max(0, 60 - hue_shift))
            if self.mode == "night":
                draw.ellipse(
                    (ball.x - 16, ball.y - 16, ball.x + 16, ball.y + 16), fill=(40, 52, 96)
                )
            draw.ellipse((ball.x - 9, ball.y - 9, ball.x + 9, ball.y + 9), fill=colour)
        if self.paused:
            shade = Image.new("RGB", (WIDTH, HEIGHT - 44), (0, 0, 0))
            image.paste(Image.blend(image.crop((0, 44, WIDTH, HEIGHT)), shade, 0.45), (0, 44))
            draw = ImageDraw.Draw(image)
            draw.text(
                (WIDTH // 2, HEIGHT // 2 + 14),
                "PAUSED",
                font=fonts["big"],
                fill=(255, 255, 255),
                anchor="mm",
            )
        return image

    def status(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "paused": self.paused,
            "score": self.score,
            "misses": self.misses,
        }


class FrameSource:
    """Steps the game at FPS on a daemon thread and publishes JPEG frames while anyone watches."""

    def __init__(self, game: Game) -> None:
        self.game = game
        self._cond = threading.Condition()
        self._seq = 0
        self._jpeg = b""
        self._viewers = 0
        self._stop = threading.Event()
        self._fonts = {
            "hud": ImageFont.load_default(size=14),
            "big": ImageFont.load_default(size=34),
        }
        self._thread = threading.Thread(target=self._run, name="liveview-frames", daemon=True)

    def start(self) -> None:
        self._publish(self.render_jpeg())
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def render_jpeg(self) -> bytes:
        with self.game.lock:
            image = self.game.render(self._fonts)
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=82)
        return buffer.getvalue()

    def _publish(self, jpeg: bytes) -> None:
        with self._cond:
            self._jpeg = jpeg
            self._seq += 1
            self._cond.notify_all()

    def _run(self) -> None:
        interval = 1 / FPS
        next_tick = time.monotonic()
        while not self._stop.is_set():
            with self.game.lock:
                self.game.step(interval)
            if self._viewers:
                self._publish(self.render_jpeg())
            next_tick += interval
            delay = next_tick - time.monotonic()
            if delay < -1:  # fell far behind (suspended laptop...): don't try to catch up
                next_tick = time.monotonic()
            self._stop.wait(max(0.0, delay))

    def add_viewer(self) -> None:
        with self._cond:
            self._viewers += 1

    def remove_viewer(self) -> None:
        with self._cond:
            self._viewers -= 1

    def next_frame(self, after_seq: int, timeout: float = 2.0) -> tuple[int, bytes]:
        """The first frame newer than `after_seq` (or the current one after `timeout`)."""
        with self._cond:
            self._cond.wait_for(lambda: self._seq > after_seq or self.stopped, timeout)
            return self._seq, self._jpeg


class StreamHandler(BaseHTTPRequestHandler):
    server: StreamHTTPServer
    server_version = "AtriumLiveView/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        # stdout belongs to the stdio transport: never print there; stay quiet on stderr too.
        return

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/stream.mjpeg":
            self._stream()
        elif path == "/frame.jpg":
            self._send(HTTPStatus.OK, "image/jpeg", self.server.source.render_jpeg())
        elif path in ("/", "/healthz"):
            self._send(
                HTTPStatus.OK, "text/plain; charset=utf-8", b"liveview stream: /stream.mjpeg\n"
            )
        else:
            self._send(HTTPStatus.NOT_FOUND, "text/plain; charset=utf-8", b"not found\n")

    def _send(self, status: HTTPStatus, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Cross-Origin-Resource-Policy", "cross-origin")
        self.end_headers()
        self.wfile.write(body)

    def _stream(self) -> None:
        source = self.server.source
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", f"multipart/x-mixed-replace; boundary={BOUNDARY}")
        self.send_header("Cache-Control", "no-cache, no-store, must-revalidate")
        self.send_header("Pragma", "no-cache")
        self.send_header("Connection", "close")
        # Lets hosts that set Cross-Origin-Embedder-Policy still embed the stream.
        self.send_header("Cross-Origin-Resource-Policy", "cross-origin")
        self.end_headers()
        source.add_viewer()
        seq = -1
        try:
            while not source.stopped:
                seq, jpeg = source.next_frame(seq)
                part = (
                    f"--{BOUNDARY}\r\nContent-Type: image/jpeg\r\n"
                    f"Content-Length: {len(jpeg)}\r\n\r\n"
                ).encode("ascii")
                self.wfile.write(part + jpeg + b"\r\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            pass  # the viewer went away
        finally:
            source.remove_viewer()


class StreamHTTPServer(ThreadingHTTPServer):
    daemon_threads = True  # open streams must not keep the process alive
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], source: FrameSource) -> None:
        self.source = source
        super().__init__(address, StreamHandler)


def start_stream_server(host: str, port: int, source: FrameSource) -> StreamHTTPServer:
    try:
        httpd = StreamHTTPServer((host, port), source)
    except OSError as exc:
        print(
            f"liveview: stream port {port} unavailable ({exc.strerror}); using a free port",
            file=sys.stderr,
        )
        httpd = StreamHTTPServer((host, 0), source)
    threading.Thread(target=httpd.serve_forever, name="liveview-http", daemon=True).start()
    return httpd


def create_server(game: Game, stream_origin: str) -> MCPServer:
    """The MCP server, its view bound to `stream_origin` (scheme://host:port)."""
    stream_url = f"{stream_origin}/stream.mjpeg"

    def status_result(summary: str) -> CallToolResult:
        with game.lock:
            status = game.status()
        status |= {"streamUrl": stream_url, "fps": FPS}
        state = "paused" if status["paused"] else "running"
        text = f"{summary} The game is {state} in {status['mode']} mode; score {status['score']}."
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=status
        )

    apps = Apps()
    apps.add_html_resource(
        APP_URI,
        APP_HTML_PATH.read_text(encoding="utf-8").replace(STREAM_URL_PLACEHOLDER, stream_url),
        name="liveview-app",
        title="Live game view",
        description="A live MJPEG view of the game with mode and pause controls.",
        # The <img> loads the stream from this origin; nothing else is external.
        csp=ResourceCsp(resource_domains=[stream_origin]),
        prefers_border=False,
    )

    @apps.tool(
        resource_uri=APP_URI,
        visibility=["model", "app"],
        title="Open the live view",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    def open_live_view() -> CallToolResult:
        """Show the live view of the running game (an MJPEG stream with controls)."""
        return status_result(f"The live view is open; the stream is at {stream_url}.")

    mcp = MCPServer(
        "liveview",
        title="Live game view",
        version="1.0.0",
        instructions="open_live_view shows a live stream of a self-playing game.",
        extensions=[apps],
    )
    app_only: dict[str, Any] = {"ui": {"visibility": ["app"]}}
    control = ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )

    @mcp.tool(title="Set the game mode", annotations=control, meta=app_only)
    def set_mode(
        mode: Annotated[Mode, Field(description="calm, chaos or night")],
    ) -> CallToolResult:
        """Switch the game's look and pace."""
        with game.lock:
            changed = game.set_mode(mode)
        return status_result(f"Mode set to {mode}." if changed else f"Already in {mode} mode.")

    @mcp.tool(title="Pause the game", annotations=control, meta=app_only)
    def pause() -> CallToolResult:
        """Freeze the game (the stream keeps showing the paused frame)."""
        with game.lock:
            game.paused = True
        return status_result("Paused.")

    @mcp.tool(title="Resume the game", annotations=control, meta=app_only)
    def resume() -> CallToolResult:
        """Resume a paused game."""
        with game.lock:
            game.paused = False
        return status_result("Resumed.")

    return mcp


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Live game view MCP App server.")
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp")
    transport.add_argument("--sse", action="store_true", help="serve the legacy SSE transport")
    parser.add_argument("--host", default="127.0.0.1", help="MCP HTTP bind address")
    parser.add_argument("--port", type=int, default=DEFAULT_HTTP_PORT, help="MCP HTTP port")
    parser.add_argument(
        "--stream-port",
        type=int,
        default=int(os.environ.get("LIVEVIEW_STREAM_PORT", DEFAULT_STREAM_PORT)),
        help="MJPEG stream port (env LIVEVIEW_STREAM_PORT, default 8765)",
    )
    args = parser.parse_args(argv)

    game = Game()
    source = FrameSource(game)
    source.start()
    httpd = start_stream_server("127.0.0.1", args.stream_port, source)
    origin = f"http://127.0.0.1:{httpd.server_address[1]}"
    print(f"liveview: streaming at {origin}/stream.mjpeg", file=sys.stderr)
    mcp = create_server(game, origin)
    try:
        if args.http:
            mcp.run("streamable-http", host=args.host, port=args.port)
        elif args.sse:
            mcp.run("sse", host=args.host, port=args.port)
        else:
            mcp.run()
    except KeyboardInterrupt:
        pass  # Ctrl-C: the HTTP server has already shut down cleanly
    finally:
        source.stop()
        httpd.shutdown()
        httpd.server_close()


if __name__ == "__main__":
    main()
