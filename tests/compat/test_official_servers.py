"""The official MCP Apps example servers (`@modelcontextprotocol/server-*` 2.0.x) in Atrium.

Every server pinned in tools/mcp-servers is set up the way an operator would: one
`manage.py mcp import mcp.json --bind acme` (the desktop `mcpServers` file), then
`manage.py mcp bind SERVER --workspace acme --auto TOOL…` for the tools its view calls (none
of these servers annotates its tools, so MCP's defaults rate every tool destructive).

For each server, in real Chromium against one real web server (shared by the module):
1. `/call` its main tool; the view mounts and the handshake completes (`ui/initialize` →
   `ui/notifications/initialized`: the host marks the view ready);
2. the view renders visibly: a text or element it shows once it has its data, and a
   screenshot whose pixels are not one flat colour (Pillow), in the light and dark theme;
3. one interaction round-trips through the server (an audited request of the view:
   `tools/call`, `resources/read`, `ui/update-model-context`, `ui/open-link`…) — or is
   correctly refused (named in the spec);
4. a reload restores the view from the stored result;
5. no CSP violation anywhere in the page, except those a spec names and explains.

Servers that need the internet (CDNs, map tiles, Wikipedia, remote videos) cannot get it on
CI: they are judged on what the host controls, and their spec says which part. docs/compat.md
has the resulting table.

Four of them work only because each server's view has its own sandbox origin with the spec's
`allow-scripts allow-same-origin` frame, and the sandbox CSP allows `'unsafe-eval' blob: data:`
(docs/sandbox.md): basic-vue (reads its parent window), pdf (localStorage, PDF.js worker from
a blob/data URL), threejs (`new Function`), video-resource (would play from a blob URL).

Profile-independent: it runs once, on the embedded pass.
"""

from __future__ import annotations

import io
import json
import os
import re
import secrets
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.helpers_ui import login
from tests.live import ROOT, LiveAtrium
from tests.waiting import WaitTimeout, poll

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("ATRIUM_PROFILE") == "production" or bool(os.environ.get("DATABASE_URL")),
        reason="profile-independent (views, sandbox and CSP do not touch the database "
        "backend): the compatibility suite runs once, on the embedded pass",
    ),
]

NODE_MODULES = ROOT / "tools" / "mcp-servers" / "node_modules" / "@modelcontextprotocol"
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")


# ---- what each server is expected to do ---------------------------------------------------------


@dataclass(frozen=True)
class Expect:
    """An audit row a view's request must leave: the host decided it (on the server)."""

    action: str
    tool: str = ""
    decision: str = "allowed"


@dataclass(frozen=True)
class Compat:
    name: str
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    # Tools that run without asking (the main tool and those the view calls).
    auto: tuple[str, ...] = ()
    # Extra command-line arguments of the server.
    server_args: tuple[str, ...] = ()
    # Shown once the view has rendered its data: a regex over the app's text, or a selector.
    rendered_text: str = ""
    rendered_selector: str = ""
    # The interaction (runs in the app frame), then the audit row its request leaves.
    interact: Callable[[Any, Any], None] | None = None
    round_trip: Expect | None = None
    # Needs the internet: what is judged instead (on the host only).
    internet: str = ""
    # False when the app cannot start its handshake without the internet.
    handshake: bool = True
    # A canvas that must show a picture (WebGL scenes, the PDF page).
    canvas: str = ""
    # CSP violations this server provokes, each with why it is right to block it.
    allowed_violations: dict[str, str] = field(default_factory=dict)


def click_get_time(app: Any, page: Any) -> None:
    before = TIME.search(app.locator("body").inner_text()).group(0)
    app.get_by_role("button", name="Get Server Time").click()
    expect(app.locator("body")).not_to_contain_text(before, timeout=20_000)
    expect(app.locator("body")).to_contain_text(TIME)


def basic(flavour: str) -> Compat:
    return Compat(
        name=f"basic-{flavour}",
        tool="get-time",
        auto=("get-time",),
        rendered_text=r"Server Time:\s*\d{4}-",
        interact=click_get_time,
        round_trip=Expect("app_tool_call", "get-time"),
    )


def choose_revenue_metric(app: Any, page: Any) -> None:
    app.locator("select").first.select_option(index=1)


def move_first_slider(app: Any, page: Any) -> None:
    slider = app.locator("input.slider").first
    before = app.locator("body").inner_text()
    slider.focus()
    for _ in range(5):
        slider.press("ArrowRight")
    expect(app.locator("body")).not_to_have_text(before)


def pick_scenario_template(app: Any, page: Any) -> None:
    before = app.locator("body").inner_text()
    app.locator("select.template-select").select_option(index=2)
    expect(app.locator("body")).not_to_have_text(before)


SERVERS: list[Compat] = [
    *(basic(f) for f in ("vanillajs", "react", "preact", "solid", "svelte", "vue")),
    Compat(
        name="budget-allocator",
        tool="get-budget-data",
        auto=("get-budget-data",),
        rendered_text=r"Allocated: \$100,000",
        # Its controls work in the view alone: the check is that they respond.
        interact=move_first_slider,
    ),
    Compat(
        name="cohort-heatmap",
        tool="get-cohort-data",
        auto=("get-cohort-data",),
        rendered_text=r"Cohort Retention Analysis[\s\S]*M11",
        interact=choose_revenue_metric,
        round_trip=Expect("app_tool_call", "get-cohort-data"),
    ),
    Compat(
        name="customer-segmentation",
        tool="get-customer-data",
        auto=("get-customer-data",),
        rendered_text=r"Enterprise\s*\(\d+\)",
        # The view loads its data itself with an app tool call.
        round_trip=Expect("app_tool_call", "get-customer-data"),
    ),
    Compat(
        name="map",
        tool="show-map",
        auto=("show-map", "geocode"),
        rendered_text=r"Failed to load CesiumJS from CDN",
        handshake=False,
        internet=(
            "CesiumJS comes from cesium.com and the tiles from OpenStreetMap: offline, the app "
            "stops before its handshake. Judged: the view mounts, the declared CDN is in the "
            "sandbox CSP (the load fails on DNS, not on the policy) and the app's own error "
            "shows; a reload shows it again."
        ),
    ),
    Compat(
        name="pdf",
        tool="display_pdf",
        arguments={"url": "{pdf}"},
        server_args=("{pdf}",),
        auto=("display_pdf", "read_pdf_bytes", "poll_pdf_commands", "submit_viewer_state"),
        rendered_selector="#pdf-canvas",
        canvas="#pdf-canvas",
        # The view fetches the document in chunks through its app-only tool.
        round_trip=Expect("app_tool_call", "read_pdf_bytes"),
    ),
    Compat(
        name="scenario-modeler",
        tool="get-scenario-data",
        auto=("get-scenario-data",),
        rendered_text=r"SaaS Scenario Modeler[\s\S]*End MRR",
        # Its controls work in the view alone: the check is that they respond.
        interact=pick_scenario_template,
    ),
    Compat(
        name="shadertoy",
        tool="render-shadertoy",
        arguments={
            "fragmentShader": "void mainImage(out vec4 fragColor, in vec2 fragCoord) {\n"
            "  vec2 uv = fragCoord / iResolution.xy;\n"
            "  fragColor = vec4(uv, 0.5, 1.0);\n}"
        },
        auto=("render-shadertoy",),
        rendered_selector="canvas#canvas",
        canvas="canvas#canvas",
    ),
    Compat(
        name="sheet-music",
        tool="play-sheet-music",
        arguments={"abcNotation": "X:1\nT:Scale\nM:4/4\nL:1/4\nK:C\nC D E F | G A B c |"},
        auto=("play-sheet-music",),
        rendered_selector="svg .abcjs-note",
    ),
    Compat(
        name="system-monitor",
        tool="get-system-info",
        auto=("get-system-info", "poll-system-stats"),
        rendered_text=r"Hostname\s*\S+",
        # The view polls its app-only tool by itself.
        round_trip=Expect("app_tool_call", "poll-system-stats"),
    ),
    Compat(
        name="threejs",
        tool="show_threejs_scene",
        arguments={
            "code": "const scene = new THREE.Scene();\n"
            "const camera = new THREE.PerspectiveCamera(75, width / height, 0.1, 1000);\n"
            "const renderer = new THREE.WebGLRenderer({ canvas, antialias: true });\n"
            "renderer.setSize(width, height);\n"
            "const cube = new THREE.Mesh(new THREE.BoxGeometry(1.5, 1.5, 1.5),"
            " new THREE.MeshStandardMaterial({ color: 0x00ff88 }));\n"
            "cube.rotation.x = 0.5; cube.rotation.y = 0.7; scene.add(cube);\n"
            "scene.add(new THREE.DirectionalLight(0xffffff, 1.5));\n"
            "scene.add(new THREE.AmbientLight(0x808080));\n"
            "camera.position.z = 3;\n"
            "renderer.render(scene, camera);",
            "height": 320,
        },
        auto=("show_threejs_scene",),
        rendered_selector="canvas#threejs-canvas",
        canvas="canvas#threejs-canvas",
    ),
    Compat(
        name="transcript",
        tool="transcribe",
        auto=("transcribe",),
        rendered_text=r"Start",
        # Recording needs the microphone, which no binding here grants (the frame's `allow`
        # attribute lacks it): judged on mounting, rendering and the reload.
    ),
    Compat(
        name="video-resource",
        tool="play_video",
        auto=("play_video",),
        rendered_text=r"Error loading video[\s\S]*fetch failed",
        # The view asks for the video through the host; the server cannot download it.
        round_trip=Expect("resource_read"),
        internet=(
            "The server downloads its videos from public CDNs (the URLs are built in; it cannot "
            "be pointed at a local file). Judged: the view's resources/read goes through the "
            "host, which allows it, and the server's failure reaches the view as an error."
        ),
    ),
    Compat(
        name="wiki-explorer",
        tool="get-first-degree-links",
        auto=("get-first-degree-links",),
        rendered_selector="#zoom-in",
        internet=(
            "The server fetches Wikipedia: offline, the result is an error and the graph stays "
            "empty, so there is nothing to click. Judged: the view mounts, completes its "
            "handshake, renders its controls, and comes back after a reload."
        ),
    ),
    Compat(
        name="debug",
        tool="debug-tool",
        auto=("debug-tool", "debug-refresh", "debug-log"),
        rendered_text=r"ontoolresult",
        # The view logs through its app-only debug-log tool by itself.
        round_trip=Expect("app_tool_call", "debug-log"),
    ),
]


# ---- one live server and one logged-in browser context for the module ---------------------------


@dataclass
class World:
    server: LiveAtrium
    password: str
    threads: dict[str, int]
    database: Path
    pdf: Path

    def thread_url(self, name: str) -> str:
        return f"{self.server.app_origin}/w/acme/t/{self.threads[name]}/"

    def audit_rows(self, since: int = 0) -> list[dict[str, Any]]:
        # Read-only, straight from the embedded database: a manage.py shell per poll would
        # cost a second each.
        with sqlite3.connect(f"file:{self.database}?mode=ro", uri=True) as db:
            db.row_factory = sqlite3.Row
            rows = db.execute(
                "SELECT id, action, decision, reason, tool_name, actor_kind, extra "
                "FROM bindings_auditevent WHERE id > ? ORDER BY id",
                (since,),
            ).fetchall()
        return [dict(row) for row in rows]

    def last_audit_id(self) -> int:
        rows = self.audit_rows()
        return rows[-1]["id"] if rows else 0


SEED = """
import json
from django.contrib.auth import get_user_model
from chat import services
owner = get_user_model().objects.create_user("olivia", password={password!r})
workspace = services.workspace_create(name="Acme", owner=owner, slug="acme")
print(json.dumps({{n: services.thread_create(workspace=workspace, title=n, actor=owner).pk
                  for n in {names!r}}}))
"""


def write_sample_pdf(path: Path) -> None:
    """A one-page PDF with a line of text (no dependency needed to make it)."""
    content = b"BT /F1 36 Tf 72 700 Td (Atrium compatibility PDF) Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    path.write_bytes(out)


def fill(value: Any, pdf: Path) -> Any:
    if isinstance(value, str):
        return value.replace("{pdf}", str(pdf))
    if isinstance(value, dict):
        return {k: fill(v, pdf) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [fill(v, pdf) for v in value]
    return value


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    if not NODE_MODULES.is_dir():
        pytest.skip("run tools/install-mcp-servers.sh (make test does)")
    var_dir = tmp_path_factory.mktemp("compat") / "var"
    server = LiveAtrium(var_dir=var_dir).setup()
    password = "pw-" + secrets.token_urlsafe(10)
    names = [spec.name for spec in SERVERS]
    threads = json.loads(
        server.shell(SEED.format(password=password, names=names)).strip().splitlines()[-1]
    )
    pdf = var_dir / "sample.pdf"
    write_sample_pdf(pdf)
    # The operator's way in: a desktop mcpServers file, imported and bound in one command…
    config = {
        "mcpServers": {
            spec.name: {
                "command": "node",
                "args": [
                    str(NODE_MODULES / f"server-{spec.name}" / "dist" / "index.js"),
                    "--stdio",
                    *fill(spec.server_args, pdf),
                ],
            }
            for spec in SERVERS
        }
    }
    (var_dir / "mcp.json").write_text(json.dumps(config))
    imported = server.manage("mcp", "import", str(var_dir / "mcp.json"), "--bind", "acme")
    assert imported.count("Added '") == len(SERVERS), imported
    # …then the tools each view may run without asking (`mcp bind`, in one process).
    binds = [
        ["bind", spec.name, "--workspace", "acme", *(a for t in spec.auto for a in ("--auto", t))]
        for spec in SERVERS
    ]
    bound = server.shell(
        "from django.core.management import call_command\n"
        f"for args in {binds!r}:\n    call_command('mcp', *args)\n"
    )
    assert bound.count("runs without asking") == len(SERVERS), bound
    server.start()
    try:
        yield World(server, password, threads, var_dir / "atrium.sqlite3", pdf)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def context(browser: Any, world: World) -> Iterator[Any]:
    context = browser.new_context(
        viewport={"width": 1280, "height": 1000}, color_scheme="light", device_scale_factor=1
    )
    page = context.new_page()
    page.set_default_timeout(30_000)
    login(page, world.server.app_origin, "olivia", world.password)
    page.close()
    yield context
    context.close()


class Violations:
    """CSP violations reported in any frame of the page (Chromium logs each one to the
    console, the sandboxed views' too)."""

    def __init__(self, page: Any) -> None:
        self.seen: list[str] = []
        page.on("console", self._console)

    def _console(self, message: Any) -> None:
        if "Content Security Policy" in message.text:
            self.seen.append(message.text[:400])

    def unexpected(self, allowed: dict[str, str]) -> list[str]:
        return [v for v in self.seen if not any(key in v for key in allowed)]


# ---- helpers -----------------------------------------------------------------------------------


def view_row(page: Any, tool: str) -> Any:
    name = page.locator(".view-tool", has_text=re.compile(f"^{re.escape(tool)}$"))
    return page.locator(".view-row:not(.view-child-call)", has=name).last


def outer_frame(row: Any) -> Any:
    return row.locator(":scope > .view-body > .view-stage > iframe.view-frame")


def app_frame(row: Any) -> Any:
    return row.frame_locator(":scope > .view-body > .view-stage > iframe.view-frame").frame_locator(
        "iframe"
    )


def wait_mounted(page: Any, row: Any) -> int:
    expect(outer_frame(row)).to_be_attached(timeout=30_000)
    return int(row.get_attribute("data-tool-call-id"))


def wait_handshake(page: Any, call_id: int) -> None:
    page.wait_for_function(
        "id => (window.AtriumAppViews.list().find(v => v.toolCallId === id) || {}).ready === true",
        arg=call_id,
        timeout=30_000,
    )
    state = page.evaluate(
        "id => window.AtriumAppViews.list().find(v => v.toolCallId === id)", call_id
    )
    assert state["protocol"] == "mcp", state


def wait_rendered(app: Any, spec: Compat) -> None:
    if spec.rendered_text:
        expect(app.locator("body")).to_contain_text(re.compile(spec.rendered_text), timeout=30_000)
    if spec.rendered_selector:
        expect(app.locator(spec.rendered_selector).first).to_be_visible(timeout=30_000)


def not_blank(png: bytes) -> tuple[bool, str]:
    """Whether a screenshot shows something: more than a flat colour and a border."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    colours = image.getcolors(maxcolors=image.width * image.height) or []
    _, dominant = max(colours)
    differing = sum(
        count
        for count, colour in colours
        if sum(abs(a - b) for a, b in zip(colour, dominant, strict=True)) > 40
    )
    share = differing / (image.width * image.height)
    distinct = len({(r // 16, g // 16, b // 16) for _, (r, g, b) in colours})
    return share > 0.005 and distinct >= 4, f"{share:.2%} non-background pixels, {distinct} colours"


def wait_painted(shoot: Callable[[], bytes], failure: str, timeout: float = 30.0) -> None:
    """Until a screenshot is ``not_blank``: an element can be visible before it is painted
    (the pdf view's canvas, while its pages still arrive in chunks through the host)."""
    details: list[str] = []

    def painted() -> bool:
        visible, detail = not_blank(shoot())
        details.append(detail)
        return visible

    try:
        poll(painted, timeout=timeout, interval=0.25, reason=failure)
    except WaitTimeout:
        raise AssertionError(f"{failure}: {details[-1]}") from None


def view_screenshot(page: Any, row: Any, path: Path) -> bytes:
    """The visible part of a view's frame (an element screenshot of a frame taller than the
    window comes out garbled)."""
    row.scroll_into_view_if_needed()
    box = outer_frame(row).bounding_box()
    # Only what shows inside the timeline (the composer sits over its bottom edge).
    timeline = page.locator("#timeline").bounding_box()
    top = max(box["y"], timeline["y"])
    height = min(box["y"] + box["height"], timeline["y"] + timeline["height"]) - top
    clip = {"x": box["x"], "y": top, "width": box["width"], "height": height}
    return page.screenshot(path=str(path), clip=clip)


def wait_for_audit(world: World, since: int, want: Expect, timeout: float = 30.0) -> dict:
    """The first audit row of a view's request matching ``want`` (bounded poll: the row is
    written by another process and no event announces it)."""
    rows: list[dict[str, Any]] = []

    def matching() -> dict | None:
        rows[:] = [r for r in world.audit_rows(since) if r["actor_kind"] == "app_view"]
        for row in rows:
            if row["action"] == want.action and (not want.tool or row["tool_name"] == want.tool):
                return row
        return None

    try:
        return poll(matching, timeout=timeout, interval=0.2, reason=f"audit row {want}")
    except WaitTimeout as exc:
        seen = [(r["action"], r["tool_name"], r["decision"]) for r in rows]
        raise AssertionError(f"{exc}; the view's rows: {seen}") from exc


# ---- the suite ---------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", SERVERS, ids=[spec.name for spec in SERVERS])
def test_official_server(spec: Compat, world: World, context: Any, screenshots: Path) -> None:
    page = context.new_page()
    page.set_default_timeout(30_000)
    violations = Violations(page)
    try:
        page.goto(world.thread_url(spec.name))
        page.wait_for_selector("#conn-indicator[data-state=live]")
        since = world.last_audit_id()
        box = page.locator("#composer-input")
        box.fill(f"/call {spec.name}.{spec.tool} {json.dumps(fill(spec.arguments, world.pdf))}")
        box.press("Enter")

        # 1. Mounted, handshake complete.
        row = view_row(page, spec.tool)
        call_id = wait_mounted(page, row)
        app = app_frame(row)
        if spec.handshake:
            wait_handshake(page, call_id)

        # 2. Rendered, visibly, in both themes.
        wait_rendered(app, spec)
        for theme in ("light", "dark"):
            page.evaluate("theme => window.AtriumTheme.set(theme)", theme)
            path = screenshots / f"compat-{spec.name}-{theme}.png"
            wait_painted(
                lambda path=path: view_screenshot(page, row, path),
                f"{spec.name} looks blank in the {theme} theme",
            )
        page.evaluate("() => window.AtriumTheme.set('light')")
        if spec.canvas:
            canvas = app.locator(spec.canvas).first
            wait_painted(canvas.screenshot, f"{spec.name}'s canvas is blank")

        # 3. One interaction through the host.
        if spec.interact is not None:
            started = world.last_audit_id()
            spec.interact(app, page)
        else:
            started = since
        if spec.round_trip is not None:
            row_found = wait_for_audit(world, started, spec.round_trip)
            assert row_found["decision"] == spec.round_trip.decision, row_found

        # 4. A reload restores it from the stored result.
        page.reload()
        page.wait_for_selector("#conn-indicator[data-state=live]")
        restored = page.locator(f'.view-row[data-tool-call-id="{call_id}"]')
        wait_mounted(page, restored)
        if spec.handshake:
            wait_handshake(page, call_id)
        wait_rendered(app_frame(restored), spec)

        # 5. No CSP violation but the named ones.
        unexpected = violations.unexpected(spec.allowed_violations)
        assert not unexpected, "CSP violations:\n" + "\n".join(unexpected)
    finally:
        page.close()
