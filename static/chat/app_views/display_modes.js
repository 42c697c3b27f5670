/* An app view's display modes: inline, picture in picture, full screen.
 * Uses its view's frame (the stage it lifts), bridge (to ask the server and answer the
 * app), cards (the gesture prompt) and context (told of every change). */
import { h, icon } from "../dom.js";
import { MODES } from "./config.js";
import { GESTURE_MODES } from "./host_cards.js";
import { liveAppViews } from "./registry.js";
import { rpcError } from "./rpc.js";

/** A small icon button of an app view's chrome (display modes, close). */
export function iconButton(name, label, onClick, cls) {
  return h("button", { class: "icon-btn icon-btn-sm view-mode-btn" + (cls ? " " + cls : ""), attrs: { type: "button", title: label, "aria-label": label }, on: { click: onClick } }, icon(name, "view-icon"));
}

export class DisplayModes {
  constructor(view) {
    this.view = view;
    this.mode = "inline";
    this.slot = view.container.querySelector('[data-slot="display-modes"]'); // the row header's buttons
    this.placeholder = null; // "Shown full screen. Bring back here" in the row while floating
  }

  /** Modes this view may be put in: the app's declared list (if any) ∩ the host's. */
  allowed() {
    const caps = this.view.bridge.appCaps;
    const declared = caps && Array.isArray(caps.availableDisplayModes) ? caps.availableDisplayModes : null;
    if (this.view.modal) return ["inline"];
    return MODES.filter((m) => m === "inline" || !declared || !declared.length || declared.indexOf(m) >= 0);
  }

  renderButtons() {
    const frame = this.view.frame;
    const allowed = this.allowed();
    const make = (mode, label, name) => {
      const b = iconButton(name, label, () => this.setMode(this.mode === mode ? "inline" : mode, "user"));
      b.setAttribute("data-mode", mode);
      b.setAttribute("aria-pressed", String(this.mode === mode));
      return b;
    };
    if (this.slot) {
      this.slot.textContent = "";
      if (frame.iframe) {
        if (allowed.indexOf("pip") >= 0) this.slot.appendChild(make("pip", this.mode === "pip" ? "Return to the chat" : "Picture in picture", "pip"));
        if (allowed.indexOf("fullscreen") >= 0) this.slot.appendChild(make("fullscreen", this.mode === "fullscreen" ? "Exit full screen" : "Full screen", "fullscreen"));
      }
    }
    const bar = frame.stageButtons;
    if (bar) {
      bar.textContent = "";
      if (this.mode === "pip" && allowed.indexOf("fullscreen") >= 0) bar.appendChild(make("fullscreen", "Full screen", "fullscreen"));
      if (this.mode === "fullscreen" && allowed.indexOf("pip") >= 0) bar.appendChild(make("pip", "Picture in picture", "pip"));
      if (this.mode !== "inline") {
        const back = iconButton(
          this.mode === "fullscreen" ? "inline" : "close",
          this.mode === "fullscreen" ? "Exit full screen (Esc)" : "Return to the chat",
          () => {
            this.setMode("inline", "user");
            const container = this.view.container;
            if (container.scrollIntoView) container.scrollIntoView({ block: "nearest" });
          },
          "view-exit"
        );
        bar.appendChild(back);
      }
    }
  }

  /** The row header's buttons go with the frame. */
  clearButtons() {
    if (this.slot) this.slot.textContent = "";
  }

  /** Host-initiated change (header buttons, Esc) or the outcome of an app request. */
  setMode(mode, source) {
    const frame = this.view.frame;
    if (MODES.indexOf(mode) < 0 || mode === this.mode || !frame.iframe) return this.mode;
    if (mode !== "inline" && this.allowed().indexOf(mode) < 0) return this.mode;
    // One floating view per kind at a time.
    liveAppViews.forEach((v) => {
      if (v.modes !== this && v.modes.mode === mode) v.modes.setMode("inline", "host");
    });
    this.apply(mode);
    this.view.context.changed();
    if (source === "user" && mode === "fullscreen") {
      const exit = frame.stage && frame.stage.querySelector(".view-exit");
      if (exit) exit.focus();
    }
    return this.mode;
  }

  apply(mode, silent) {
    const prev = this.mode;
    const { frame, container } = this.view;
    this.mode = mode;
    const stage = frame.stage;
    if (stage) {
      stage.setAttribute("data-mode", mode);
      const popover = typeof stage.showPopover === "function";
      if (mode === "inline") {
        if (popover && stage.hasAttribute("popover")) {
          try {
            stage.hidePopover();
          } catch (e) {
            /* already hidden */
          }
          stage.removeAttribute("popover");
        }
        stage.classList.remove("is-floating");
        frame.fitInline(true);
        if (this.placeholder && this.placeholder.parentNode) this.placeholder.parentNode.removeChild(this.placeholder);
        this.placeholder = null;
      } else {
        // The top layer lifts the panel above the chat without moving the frame in the
        // DOM (moving an iframe reloads it).
        if (popover) {
          if (!stage.hasAttribute("popover")) stage.setAttribute("popover", "manual");
          try {
            if (!stage.matches(":popover-open")) stage.showPopover();
          } catch (e) {
            /* fall back to fixed positioning */
          }
        }
        stage.classList.add("is-floating");
        frame.fitInline(false);
        const where = mode === "pip" ? "Shown in picture in picture." : "Shown full screen.";
        if (!this.placeholder) {
          this.placeholder = h(
            "div",
            { class: "view-away" },
            h("span", { text: where }),
            h("button", { class: "btn btn-sm", attrs: { type: "button" }, text: "Bring back here", on: { click: () => this.setMode("inline", "user") } })
          );
          frame.slot.appendChild(this.placeholder);
        } else {
          this.placeholder.firstChild.textContent = where;
        }
      }
    }
    if (container.classList) {
      container.classList.toggle("view-is-pip", mode === "pip");
      container.classList.toggle("view-is-fullscreen", mode === "fullscreen");
    }
    if (!silent) this.renderButtons();
    return prev;
  }

  /** ui/request-display-mode: the server arbitrates; full screen and pip also need a
   *  gesture in the frame or the person's Allow on a host card. */
  request(id, params) {
    const { bridge, cards } = this.view;
    const mode = params.mode;
    if (MODES.indexOf(mode) < 0) {
      bridge.respondError(id, { code: -32602, message: "Unknown display mode.", data: { reason: "invalid_display_mode" } });
      return;
    }
    const caps = bridge.appCaps;
    const declared = caps && Array.isArray(caps.availableDisplayModes) ? caps.availableDisplayModes : undefined;
    const proceed = (gesture) => {
      const ask = Object.assign({}, params, { mode, current: this.mode, gesture });
      if (declared) ask.availableDisplayModes = declared;
      bridge.forward("ui/request-display-mode", ask).then(
        (result) => {
          const granted = result && MODES.indexOf(result.mode) >= 0 ? result.mode : this.mode;
          if (granted !== this.mode && (granted === "inline" || this.allowed().indexOf(granted) >= 0)) this.setMode(granted, "app");
          bridge.respond(id, { mode: this.mode });
        },
        (err) => bridge.respondError(id, rpcError(err))
      );
    };
    // Full screen and pip only right after a click or key in this frame (F14); otherwise
    // the host asks, and Allow on its card is the gesture. "inline" never needs one.
    if (mode === this.mode || GESTURE_MODES.indexOf(mode) < 0 || this.allowed().indexOf(mode) < 0 || cards.frameGesture()) {
      proceed(GESTURE_MODES.indexOf(mode) >= 0 && mode !== this.mode && cards.frameGesture() ? "frame" : "");
      return;
    }
    cards.cancel("display-mode");
    cards.displayModeCard(mode, proceed, () => bridge.respond(id, { mode: this.mode })); // not now: the mode it is in
  }
}
