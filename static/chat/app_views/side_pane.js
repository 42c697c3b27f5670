/* The side pane: one app view pinned beside the conversation, per member and thread
 * (docs/side-pane.md; the "split" display mode of the ext-apps proposal, PR #739).
 *
 * - The pane is host chrome (templates/chat/thread.html renders it from the member's layout,
 *   so a reload shows it at once): the app's and its server's names, Unpin, "Show in the
 *   conversation", a resize handle. The app cannot draw outside its frame.
 * - The view is NOT moved into the pane (moving an iframe reloads it): its stage stays in
 *   its row, fixed over the pane's body (`place`), and the row shows "Pinned beside the
 *   conversation" instead. Bridge, state, approvals and token are the inline view's own.
 * - The member's layout lives on the server (`layout.set`, chat/layout/services.py): it is
 *   restored after a reload, follows on their other tabs and devices (a `layout` frame on
 *   their own sockets), and nobody else sees it change.
 * - Narrow windows (under NARROW_QUERY): pinning shows the view full screen, with "Back to
 *   the conversation"; the header's chip shows it again.
 * - Keyboard: Alt+Shift+P moves focus between the pane and the composer; Esc in the pane
 *   (or in the app: the proxy relays it) returns to the composer.
 */
import { h } from "../dom.js";
import { liveAppViews } from "./registry.js";
import { request } from "./rpc.js";

export const NARROW_QUERY = "(max-width: 899px)";
export const SHORTCUT_LABEL = "Alt+Shift+P";
const MIN_WIDTH = 320;
const THREAD_MIN = 420; // the conversation keeps at least this much (app_views.css: the same)
const KEY_STEP = 32;

const SVG_NS = "http://www.w3.org/2000/svg";
const PANE_ICONS = {
  pin: "M3 5h18v14H3zM15 5v14",
  unpin: "M6 6l12 12M18 6 6 18",
  back: "M15 6l-6 6 6 6",
  locate: "M4 6h16M4 12h10M4 18h7M17 14l3 3-3 3",
};

/** A small icon of the pane's chrome (the pane's own set: pin, unpin, back, locate). */
export function paneIcon(name, cls) {
  const svg = document.createElementNS(SVG_NS, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  svg.setAttribute("class", "icon" + (cls ? " " + cls : ""));
  const path = document.createElementNS(SVG_NS, "path");
  path.setAttribute("d", PANE_ICONS[name] || PANE_ICONS.pin);
  svg.appendChild(path);
  return svg;
}

function paneButton(name, label, onClick, cls) {
  return h("button", { class: "icon-btn icon-btn-sm side-pane-btn" + (cls ? " " + cls : ""), attrs: { type: "button", title: label, "aria-label": label }, on: { click: onClick } }, paneIcon(name, "view-icon"));
}

class SidePane {
  constructor() {
    this.client = null;
    this.layout = { toolCallId: null, width: 480, app: null };
    this.view = null; // the AppView shown in the pane
    this.collapsed = false; // narrow windows: the member went back to the conversation
    this.els = null;
    this.saveTimer = null;
    this.observer = null;
    this.narrowMedia = window.matchMedia ? window.matchMedia(NARROW_QUERY) : null;
  }

  // ---- setup (thread_page.js) -------------------------------------------------------------

  /** `layout`: the member's layout as the page was served ({toolCallId, width, app}). */
  init({ client, layout }) {
    this.client = client;
    const wrap = document.getElementById("thread-layout");
    const aside = document.getElementById("side-pane");
    if (!wrap || !aside) return;
    this.els = {
      wrap,
      aside,
      body: aside.querySelector("[data-pane-body]"),
      status: aside.querySelector("[data-pane-status]"),
      title: aside.querySelector("[data-pane-title]"),
      tool: aside.querySelector("[data-pane-tool]"),
      server: aside.querySelector("[data-pane-server]"),
      handle: aside.querySelector("[data-pane-handle]"),
      chip: document.getElementById("pane-chip"),
      chipLabel: document.querySelector("[data-pane-chip-label]"),
    };
    if (layout && typeof layout === "object") this.layout = Object.assign(this.layout, layout);
    // On a narrow window a restored pin starts behind the conversation (the chip shows it).
    this.collapsed = !!this.layout.toolCallId && this.isNarrow();
    this.bindChrome();
    if (client && typeof client.on === "function") {
      client.on("layout", (frame) => {
        if (frame && frame.layout) this.applyServer(frame.layout);
      });
    }
    if (this.narrowMedia && this.narrowMedia.addEventListener) this.narrowMedia.addEventListener("change", () => this.refresh());
    window.addEventListener("resize", () => this.place());
    if (typeof ResizeObserver === "function" && this.els.body) {
      this.observer = new ResizeObserver(() => this.place());
      this.observer.observe(this.els.body);
    }
    this.render();
  }

  bindChrome() {
    const { aside, handle, chip } = this.els;
    aside.querySelectorAll("[data-pane-action]").forEach((button) => {
      const action = button.getAttribute("data-pane-action");
      button.addEventListener("click", () => {
        if (action === "unpin") this.unpin();
        else if (action === "back") this.collapse();
        else if (action === "locate") this.locate();
      });
    });
    if (chip) chip.addEventListener("click", () => this.reveal(true));
    aside.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && !event.defaultPrevented) {
        event.preventDefault();
        this.toComposer();
      }
    });
    if (handle) this.bindHandle(handle);
    document.addEventListener("keydown", (event) => {
      if (!(event.altKey && event.shiftKey && !event.ctrlKey && !event.metaKey && event.code === "KeyP")) return;
      if (!this.layout.toolCallId) return;
      event.preventDefault();
      if (this.hasFocus()) this.toComposer();
      else this.reveal(true);
    });
  }

  // ---- what the page asks ----------------------------------------------------------------

  isNarrow() {
    return !!(this.narrowMedia && this.narrowMedia.matches);
  }

  /** Whether this call's view is the one pinned (mountAppView opens it in the pane). */
  wants(id) {
    return this.layout.toolCallId !== null && this.layout.toolCallId !== undefined && this.layout.toolCallId === id;
  }

  /** Whether the pane shows its view full screen (a narrow window, not collapsed). */
  coversWindow() {
    return this.isNarrow() && !!this.layout.toolCallId && !this.collapsed;
  }

  /** A view came to life (mountAppView): the pinned one goes into the pane. */
  adopt(view) {
    if (!this.wants(view.id) || view.modal) return;
    view.modes.mode = "split"; // before its frame exists: it opens at once, in the pane
    this.view = view;
    this.render();
  }

  /** The snapshot is on the page: a pin whose view is not there says so. */
  settled() {
    if (this.layout.toolCallId && !this.view) this.render();
  }

  // ---- the display mode's side (display_modes.js) ----------------------------------------

  /** `view` entered "split" (`source`: user | app | server | host). */
  shown(view, source) {
    this.view = view;
    const changed = this.layout.toolCallId !== view.id;
    this.layout.toolCallId = view.id;
    const call = view.feed.call || {};
    this.layout.app = { server: (call.server && (call.server.name || call.server.slug)) || view.appName(), serverSlug: (call.server && call.server.slug) || "", tool: call.tool || "" };
    if (source === "user" || source === "app") this.collapsed = false;
    if (changed && (source === "user" || source === "app")) this.save({ toolCallId: view.id });
    this.render();
    if (source === "user" && this.isNarrow()) this.focusView();
  }

  /** `view` left "split": unpinned (saved) unless another view replaced it or the server
   *  said so. */
  hidden(view, source) {
    if (this.view !== view) return;
    this.view = null;
    if (source === "server" || source === "replaced") {
      this.render();
      return;
    }
    this.layout.toolCallId = null;
    this.layout.app = null;
    this.save({ toolCallId: null });
    this.render();
  }

  /** The view's stage went (teardown, remount): the pane says so until it is back. */
  stageChanged(view) {
    if (this.view === view) this.render();
  }

  /** Unpin from the pane's chrome or the row's placeholder. */
  unpin() {
    const view = this.view;
    if (view) {
      view.modes.setMode("inline", "user");
      return;
    }
    this.layout.toolCallId = null;
    this.layout.app = null;
    this.save({ toolCallId: null });
    this.render();
  }

  /** A `layout` from the server: this member's other tab or device changed it. */
  applyServer(layout) {
    const width = Number(layout.width);
    if (isFinite(width) && width > 0) this.layout.width = width;
    const id = layout.toolCallId === undefined ? null : layout.toolCallId;
    if (id !== this.layout.toolCallId) {
      const current = this.view;
      this.layout.toolCallId = id;
      this.layout.app = layout.app || null;
      if (current) {
        this.view = null;
        current.modes.setMode("inline", "server");
      }
      const next = id === null ? null : liveAppViews.find((v) => v.id === id && !v.modal && !v.closed);
      if (next) next.modes.setMode("split", "server");
    }
    this.render();
  }

  // ---- chrome ----------------------------------------------------------------------------

  render() {
    if (!this.els) return;
    const { wrap, aside, chip, chipLabel, title, tool, server, status } = this.els;
    const pinned = !!this.layout.toolCallId;
    const narrow = this.isNarrow();
    wrap.classList.toggle("has-pane", pinned);
    wrap.classList.toggle("pane-collapsed", pinned && narrow && this.collapsed);
    wrap.style.setProperty("--pane-width", Math.max(MIN_WIDTH, Math.round(this.layout.width || 480)) + "px");
    aside.hidden = !pinned;
    const app = this.layout.app || {};
    const name = app.server || (this.view && this.view.appName()) || "App";
    if (title) title.textContent = name;
    if (tool) tool.textContent = app.tool || "";
    if (server) server.textContent = app.serverSlug ? "MCP server " + app.serverSlug : "";
    if (chip) chip.hidden = !(pinned && narrow && this.collapsed);
    if (chipLabel) chipLabel.textContent = name;
    if (status) {
      const stage = this.view && this.view.frame.stage;
      status.textContent = "";
      if (pinned && !stage) {
        const phase = this.view ? this.view.lifecycle.phase : "missing";
        if (phase === "failed" || phase === "closed" || phase === "missing") {
          status.appendChild(h("p", { text: phase === "missing" ? "This view is not on this page any more." : "The view is not showing; its row in the conversation says why." }));
          status.appendChild(h("button", { class: "btn btn-sm", attrs: { type: "button" }, text: "Unpin", on: { click: () => this.unpin() } }));
        } else {
          status.appendChild(h("span", { class: "spinner spinner-sm", attrs: { "aria-hidden": "true" } }));
          status.appendChild(h("span", { text: "Loading " + name + "…" }));
        }
      }
      status.hidden = !pinned || !!stage;
    }
    this.syncHandle();
    this.place();
    if (this.view) this.view.context.changed(); // mode, size: the app is told what changed
  }

  /** The pinned stage over the pane's body (it stays in its row: moving it would reload it). */
  place() {
    const view = this.view;
    const stage = view && view.frame.stage;
    if (!stage || view.modes.mode !== "split" || !this.els) return;
    const hide = this.els.aside.hidden || (this.isNarrow() && this.collapsed);
    stage.classList.toggle("is-pane-hidden", hide);
    if (hide) return;
    const r = this.els.body.getBoundingClientRect();
    stage.style.left = Math.round(r.left) + "px";
    stage.style.top = Math.round(r.top) + "px";
    stage.style.width = Math.round(r.width) + "px";
    stage.style.height = Math.round(r.height) + "px";
  }

  /** Styles the stage had only while pinned. */
  release(stage) {
    if (!stage) return;
    stage.classList.remove("is-pinned", "is-pane-hidden");
    ["left", "top", "width", "height"].forEach((k) => stage.style.removeProperty(k));
  }

  collapse() {
    this.collapsed = true;
    this.render();
    this.toComposer();
  }

  /** Show the pane (a narrow window: full screen) and put focus in it. */
  reveal(focus) {
    if (!this.layout.toolCallId) return;
    this.collapsed = false;
    this.render();
    if (focus) this.focusView();
  }

  /** The row the view came from, in the conversation. */
  locate() {
    const view = this.view;
    if (!view) return;
    if (this.isNarrow()) this.collapse();
    const row = view.container;
    if (row && row.scrollIntoView) row.scrollIntoView({ block: "center" });
    const away = row && row.querySelector(".view-away button");
    if (away) away.focus({ preventScroll: true });
  }

  hasFocus() {
    const active = document.activeElement;
    if (!active || !this.els) return false;
    if (this.els.aside.contains(active)) return true;
    const stage = this.view && this.view.frame.stage;
    return !!(stage && stage.contains(active));
  }

  focusView() {
    const iframe = this.view && this.view.frame.iframe;
    if (iframe && this.view.modes.mode === "split") iframe.focus();
    else if (this.els && this.els.title) this.els.title.focus();
  }

  toComposer() {
    const input = document.getElementById("composer-input");
    if (input && !input.disabled) input.focus();
    else {
      const timeline = document.getElementById("timeline");
      if (timeline) timeline.focus();
    }
  }

  // ---- width -----------------------------------------------------------------------------

  maxWidth() {
    const wrap = this.els && this.els.wrap;
    const total = wrap ? wrap.getBoundingClientRect().width : window.innerWidth;
    return Math.max(MIN_WIDTH, Math.round(total - THREAD_MIN));
  }

  /** The width the pane shows (CSS clamps it the same way). */
  shownWidth() {
    return Math.round(this.els.aside.getBoundingClientRect().width) || this.layout.width;
  }

  setWidth(width, persist) {
    this.layout.width = Math.max(MIN_WIDTH, Math.min(this.maxWidth(), Math.round(width)));
    this.els.wrap.style.setProperty("--pane-width", this.layout.width + "px");
    this.syncHandle();
    this.place();
    if (persist) {
      clearTimeout(this.saveTimer);
      this.saveTimer = setTimeout(() => this.save({ width: this.layout.width }), persist === "soon" ? 400 : 0);
    }
  }

  syncHandle() {
    const handle = this.els && this.els.handle;
    if (!handle) return;
    handle.setAttribute("aria-valuemin", String(MIN_WIDTH));
    handle.setAttribute("aria-valuemax", String(this.maxWidth()));
    handle.setAttribute("aria-valuenow", String(Math.round(this.layout.width)));
  }

  bindHandle(handle) {
    let dragging = false;
    handle.addEventListener("pointerdown", (event) => {
      if (event.button !== 0 || this.isNarrow()) return;
      dragging = true;
      handle.setPointerCapture(event.pointerId);
      this.els.wrap.classList.add("is-resizing");
      event.preventDefault();
    });
    handle.addEventListener("pointermove", (event) => {
      if (!dragging) return;
      const right = this.els.wrap.getBoundingClientRect().right;
      this.setWidth(right - event.clientX, false);
    });
    const end = (event) => {
      if (!dragging) return;
      dragging = false;
      if (handle.hasPointerCapture(event.pointerId)) handle.releasePointerCapture(event.pointerId);
      this.els.wrap.classList.remove("is-resizing");
      this.setWidth(this.layout.width, "now");
    };
    handle.addEventListener("pointerup", end);
    handle.addEventListener("pointercancel", end);
    handle.addEventListener("dblclick", () => this.setWidth(480, "now"));
    handle.addEventListener("keydown", (event) => {
      const step = event.shiftKey ? KEY_STEP * 3 : KEY_STEP;
      let next = null;
      if (event.key === "ArrowLeft") next = this.shownWidth() + step;
      else if (event.key === "ArrowRight") next = this.shownWidth() - step;
      else if (event.key === "Home") next = this.maxWidth();
      else if (event.key === "End") next = MIN_WIDTH;
      if (next === null) return;
      event.preventDefault();
      this.setWidth(next, "soon");
    });
  }

  // ---- the server ------------------------------------------------------------------------

  save(change) {
    if (!this.client) return;
    request(this.client, Object.assign({ type: "layout.set" }, change)).then(
      (result) => {
        const layout = result && result.layout;
        // The reply confirms; a newer local change (another save in flight) wins.
        if (layout && layout.toolCallId === this.layout.toolCallId && layout.app) this.layout.app = layout.app;
      },
      (err) => {
        if (this.client && typeof this.client.toast === "function") this.client.toast((err && err.message) || "The pane could not be saved.", "error");
      }
    );
  }

  /** Re-layout after the window crossed the narrow threshold. */
  refresh() {
    if (this.isNarrow() && this.layout.toolCallId && !this.hasFocus()) this.collapsed = true;
    this.render();
  }

  /** For tests and debugging (window.AtriumAppViews.pane()). */
  summary() {
    return { toolCallId: this.layout.toolCallId, width: this.layout.width, shownWidth: this.els && !this.els.aside.hidden ? this.shownWidth() : 0, narrow: this.isNarrow(), collapsed: this.collapsed, mounted: !!(this.view && this.view.frame.stage) };
  }
}

export const sidePane = new SidePane();
