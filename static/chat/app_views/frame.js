/* An app view's frame: the stage in its row (title bar, permission prompt, iframe, notice),
 * the loading and failure states that stand in for it, and its inline height. */
import { h, icon } from "../dom.js";
import { FLIP_LIMIT, FREEZE_MS, INITIAL_HEIGHT, MAX_HEIGHT, MIN_HEIGHT, OUTER_SANDBOX } from "./config.js";
import { clamp } from "./rpc.js";

function loadingNode(text, extraClass) {
  return h("div", { class: "view-loading" + (extraClass ? " " + extraClass : ""), attrs: { role: "status" } }, h("span", { class: "spinner spinner-sm", attrs: { "aria-hidden": "true" } }), h("span", { text }));
}

export class ViewFrame {
  /** `slot`: where the stage goes; `isInline()`: whether the view is shown in its row
   *  (pip and full screen size the frame by their panel); `onResized()`: the frame's box
   *  changed (the host context follows); `appName()`: for titles and warnings. */
  constructor({ slot, isInline, onResized, appName }) {
    this.slot = slot;
    this.isInline = isInline;
    this.onResized = onResized;
    this.appName = appName;
    this.height = INITIAL_HEIGHT;
    this.iframe = null;
    this.stage = null;
    this.stageButtons = null; // the stage bar's buttons (display modes, when floating)
    this.notice = null; // a line under the frame (showNotice)
    this.noticeTimer = null;
    this.loading = null;
    this.loadingOverlay = null;
    this.resizeObserver = null;
    this.resetSizing();
  }

  /** Per document: the view's size reports start over. */
  resetSizing() {
    this.flips = [];
    this.lastDir = 0;
    this.frozenUntil = 0;
  }

  showLoading() {
    this.slot.textContent = "";
    this.loading = loadingNode("Loading " + this.appName() + "…");
    this.loading.style.minHeight = this.height + "px";
    this.slot.appendChild(this.loading);
  }

  /** A card in place of the frame (a failure, "closed this view"). */
  showCard(card) {
    this.slot.textContent = "";
    this.slot.appendChild(card);
  }

  /** The stage and its iframe, not yet pointed at the sandbox (see load()). */
  build({ title, frameTitle, allow, prompt, modal }) {
    const stage = h("div", { class: "view-stage", attrs: { "data-mode": "inline" } });
    const bar = h("div", { class: "view-stage-bar" }, h("span", { class: "view-stage-title", text: title }), h("span", { class: "view-spacer" }));
    this.stageButtons = h("span", { class: "view-stage-actions" });
    bar.appendChild(this.stageButtons);
    const iframe = document.createElement("iframe");
    iframe.className = "view-frame";
    iframe.setAttribute("sandbox", OUTER_SANDBOX);
    if (typeof allow === "string" && allow) iframe.setAttribute("allow", allow);
    iframe.setAttribute("title", frameTitle);
    iframe.setAttribute("referrerpolicy", "no-referrer");
    iframe.style.height = this.height + "px";
    this.notice = h("div", { class: "view-notice", attrs: { role: "status", "aria-live": "polite" } });
    this.notice.hidden = true;
    stage.appendChild(bar);
    if (prompt) stage.appendChild(prompt);
    stage.appendChild(iframe);
    stage.appendChild(this.notice);
    this.stage = stage;
    this.iframe = iframe;
    if (modal) stage.classList.add("is-modal");
    this.slot.textContent = "";
    this.slot.appendChild(stage);
    if (this.loading) {
      this.loadingOverlay = loadingNode("Loading " + this.appName() + "…", "view-loading-overlay");
      stage.appendChild(this.loadingOverlay);
    }
  }

  load(src) {
    this.iframe.src = src;
  }

  /** The proxy answered: the loading overlay goes. */
  loaded() {
    if (this.loadingOverlay && this.loadingOverlay.parentNode) this.loadingOverlay.parentNode.removeChild(this.loadingOverlay);
    this.loadingOverlay = null;
  }

  /** The frame's window (messages from it are this view's), or null. */
  window() {
    return this.iframe ? this.iframe.contentWindow : null;
  }

  remove() {
    if (this.resizeObserver) this.resizeObserver.disconnect();
    this.resizeObserver = null;
    if (this.iframe) {
      this.iframe.removeAttribute("src");
      if (this.iframe.parentNode) this.iframe.parentNode.removeChild(this.iframe);
    }
    this.iframe = null;
    if (this.stage && this.stage.parentNode) this.stage.parentNode.removeChild(this.stage);
    this.stage = null;
  }

  /** Host chrome above the frame (host cards): created on first use. */
  insertAboveFrame(el) {
    if (!this.stage || !this.iframe) return false;
    this.stage.insertBefore(el, this.iframe);
    return true;
  }

  /** A line under the frame for 8 s ("Opened a link from …: <url>"). */
  showNotice(text, url) {
    if (!this.notice) return;
    this.notice.textContent = "";
    this.notice.appendChild(document.createTextNode(text));
    if (url) {
      const a = h("a", { attrs: { href: url, target: "_blank", rel: "noopener noreferrer" }, text: url.length > 80 ? url.slice(0, 77) + "…" : url });
      this.notice.appendChild(a);
      this.notice.appendChild(icon("external", "view-icon"));
    }
    this.notice.hidden = false;
    clearTimeout(this.noticeTimer);
    this.noticeTimer = setTimeout(() => {
      if (this.notice) this.notice.hidden = true;
    }, 8000);
  }

  /** ui/notifications/size-changed (and MCP-UI ui-size-change): the inline height. */
  onSize(params) {
    if (!this.isInline() || !this.iframe) return; // pip / fullscreen: the frame fills its panel
    const wanted = Number(params && params.height);
    if (!isFinite(wanted) || wanted <= 0) return;
    let next = clamp(Math.ceil(wanted), MIN_HEIGHT, MAX_HEIGHT);
    if (Math.abs(next - this.height) < 2) return;
    const now = Date.now();
    if (now < this.frozenUntil) return;
    const dir = next > this.height ? 1 : -1;
    this.flips = this.flips.filter((t) => now - t < 1000);
    if (this.lastDir && dir !== this.lastDir) this.flips.push(now);
    this.lastDir = dir;
    if (this.flips.length > FLIP_LIMIT) {
      // Oscillating (typically a height:100% document): settle on the larger size, stop listening for a while.
      this.frozenUntil = now + FREEZE_MS;
      this.flips = [];
      next = Math.max(next, this.height);
      if (window.console) console.warn("Atrium: the " + this.appName() + " view keeps resizing; its height is frozen briefly.");
    }
    this.setHeight(next);
  }

  setHeight(px) {
    this.height = px;
    if (this.iframe && this.isInline()) this.iframe.style.height = px + "px";
  }

  /** Inline: the frame takes the view's height; floating: its panel's (`null`). */
  fitInline(inline) {
    if (this.iframe) this.iframe.style.height = inline ? this.height + "px" : "";
  }

  /** Width changes (and height changes while floating) → onResized, debounced. */
  watchSize() {
    if (typeof ResizeObserver !== "function" || !this.iframe) return;
    let lastWidth = 0;
    let lastHeight = 0;
    let timer = null;
    this.resizeObserver = new ResizeObserver((entries) => {
      const rect = entries[0].contentRect;
      const widthChanged = Math.abs(rect.width - lastWidth) >= 2;
      const heightChanged = !this.isInline() && Math.abs(rect.height - lastHeight) >= 2;
      if (!widthChanged && !heightChanged) return;
      lastWidth = rect.width;
      lastHeight = rect.height;
      clearTimeout(timer);
      timer = setTimeout(() => this.onResized(), 150);
    });
    this.resizeObserver.observe(this.iframe);
  }

  /** containerDimensions of the host context. */
  dimensions() {
    const rect = this.iframe ? this.iframe.getBoundingClientRect() : { width: 0, height: 0 };
    const width = Math.round(rect.width) || Math.round(this.slot.getBoundingClientRect().width) || 600;
    if (this.isInline()) return { width, maxHeight: MAX_HEIGHT };
    return { width, height: Math.round(rect.height) || 300 };
  }
}
