/* An app view's display modes: inline, picture in picture, full screen, and "split": pinned
 * in the side pane beside the conversation (side_pane.js, docs/side-pane.md).
 * Uses its view's frame (the stage it lifts), bridge (to ask the server and answer the
 * app), cards (the gesture prompt) and context (told of every change). */
import { h, icon } from "../dom.js";
import { MODES } from "./config.js";
import { GESTURE_MODES } from "./host_cards.js";
import { liveAppViews } from "./registry.js";
import { rpcError } from "./rpc.js";
import { paneIcon, SHORTCUT_LABEL, sidePane } from "./side_pane.js";

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

  /** The modes the app declared (ui/initialize appCapabilities), or null. */
  declared() {
    const caps = this.view.bridge.appCaps;
    return caps && Array.isArray(caps.availableDisplayModes) && caps.availableDisplayModes.length ? caps.availableDisplayModes : null;
  }

  /** Modes this view may be put in: the app's declared list (if any) ∩ the host's. A member
   *  may pin any view beside the conversation ("split"): an app that did not declare it is
   *  told "inline", sized by the pane (reported()). */
  allowed() {
    const declared = this.declared();
    if (this.view.modal) return ["inline"];
    return MODES.filter((m) => m === "inline" || m === "split" || !declared || declared.indexOf(m) >= 0);
  }

  /** hostContext.availableDisplayModes: "split" only to an app that declared it (the MCP
   *  Apps SDK's schema knows inline, fullscreen and pip; the split proposal, ext-apps PR
   *  #739, is negotiated this way). */
  hostModes() {
    const declared = this.declared();
    return MODES.filter((m) => m !== "split" || (declared && declared.indexOf("split") >= 0));
  }

  /** hostContext.displayMode: the mode as the app may hear it. Pinned: "split" when the app
   *  declared it; on a narrow window the pane covers it ("fullscreen"); otherwise "inline"
   *  with the pane's dimensions (containerDimensions). */
  reported() {
    if (this.mode !== "split") return this.mode;
    const declared = this.declared();
    if (sidePane.coversWindow() && (!declared || declared.indexOf("fullscreen") >= 0)) return "fullscreen";
    return declared && declared.indexOf("split") >= 0 ? "split" : "inline";
  }

  /** The pin control: pins this view beside the conversation, or unpins it. */
  pinButton() {
    const pinned = this.mode === "split";
    const label = pinned ? "Unpin from the side pane" : "Pin beside the conversation (" + SHORTCUT_LABEL + " moves focus to it)";
    const b = h("button", { class: "icon-btn icon-btn-sm view-mode-btn view-pin-btn", attrs: { type: "button", title: label, "aria-label": pinned ? "Unpin from the side pane" : "Pin beside the conversation", "data-mode": "split", "aria-pressed": String(pinned) }, on: { click: () => this.setMode(pinned ? "inline" : "split", "user") } }, paneIcon("pin", "view-icon"));
    return b;
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
        if (!this.view.modal) this.slot.appendChild(this.pinButton());
        if (allowed.indexOf("pip") >= 0) this.slot.appendChild(make("pip", this.mode === "pip" ? "Return to the chat" : "Picture in picture", "pip"));
        if (allowed.indexOf("fullscreen") >= 0) this.slot.appendChild(make("fullscreen", this.mode === "fullscreen" ? "Exit full screen" : "Full screen", "fullscreen"));
      }
    }
    const bar = frame.stageButtons;
    if (bar) {
      bar.textContent = "";
      if (this.mode === "pip" && allowed.indexOf("fullscreen") >= 0) bar.appendChild(make("fullscreen", "Full screen", "fullscreen"));
      if (this.mode === "fullscreen" && allowed.indexOf("pip") >= 0) bar.appendChild(make("pip", "Picture in picture", "pip"));
      if ((this.mode === "pip" || this.mode === "fullscreen") && !this.view.modal) bar.appendChild(this.pinButton());
      if (this.mode === "pip" || this.mode === "fullscreen") {
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
    if (MODES.indexOf(mode) < 0 || mode === this.mode) return this.mode;
    if (mode !== "inline" && this.allowed().indexOf(mode) < 0) return this.mode;
    if (!frame.iframe) return this.presetPin(mode, source);
    // One floating view per kind at a time (and one pinned view per member and thread).
    liveAppViews.forEach((v) => {
      if (v.modes !== this && v.modes.mode === mode) v.modes.setMode("inline", mode === "split" ? "replaced" : "host");
    });
    const prev = this.apply(mode);
    if (mode === "split") sidePane.shown(this.view, source);
    else if (prev === "split") sidePane.hidden(this.view, source);
    this.view.context.changed();
    if (source === "user" && mode === "fullscreen") {
      const exit = frame.stage && frame.stage.querySelector(".view-exit");
      if (exit) exit.focus();
    }
    return this.mode;
  }

  /** Pinning (or unpinning) a view whose frame is not built yet (not opened, failed,
   *  closed): it opens at once, in the pane. */
  presetPin(mode, source) {
    const view = this.view;
    if (view.modal) return this.mode;
    if (mode === "split") {
      liveAppViews.forEach((v) => {
        if (v.modes !== this && v.modes.mode === "split") v.modes.setMode("inline", "replaced");
      });
      this.mode = "split";
      sidePane.shown(view, source);
      if (view.lifecycle.phase === "idle") view.lifecycle.open();
    } else if (this.mode === "split") {
      this.mode = mode === "inline" ? "inline" : this.mode;
      if (this.placeholder && this.placeholder.parentNode) this.placeholder.parentNode.removeChild(this.placeholder);
      this.placeholder = null;
      if (view.container.classList) view.container.classList.remove("view-is-pinned");
      sidePane.hidden(view, source);
    }
    return this.mode;
  }

  /** Esc in a pinned view (relayed by its proxy): focus goes back to the composer (a
   *  narrow window also goes back to the conversation). */
  leavePane() {
    if (sidePane.coversWindow()) sidePane.collapse();
    else sidePane.toComposer();
  }

  /** The row's line while the view is elsewhere: where it is and how to bring it back. */
  awayLine(mode) {
    if (mode === "split") {
      const narrow = sidePane.isNarrow();
      return h(
        "div",
        { class: "view-away view-pinned-away", attrs: { "data-away": "split" } },
        h("span", { class: "view-away-text" }, paneIcon("pin", "view-icon"), h("span", { text: "Pinned beside the conversation" })),
        h(
          "span",
          { class: "view-away-actions" },
          h("button", { class: "btn btn-sm", attrs: { type: "button", "data-away-action": "show", title: "Move focus to the pane (" + SHORTCUT_LABEL + ")" }, text: narrow ? "Show" : "Go to pane", on: { click: () => sidePane.reveal(true) } }),
          h("button", { class: "btn btn-sm", attrs: { type: "button", "data-away-action": "unpin" }, text: "Unpin", on: { click: () => this.setMode("inline", "user") } })
        )
      );
    }
    return h(
      "div",
      { class: "view-away" },
      h("span", { text: mode === "pip" ? "Shown in picture in picture." : "Shown full screen." }),
      h("button", { class: "btn btn-sm", attrs: { type: "button" }, text: "Bring back here", on: { click: () => this.setMode("inline", "user") } })
    );
  }

  apply(mode, silent) {
    const prev = this.mode;
    const { frame, container } = this.view;
    this.mode = mode;
    const stage = frame.stage;
    if (stage) {
      stage.setAttribute("data-mode", mode);
      const popover = typeof stage.showPopover === "function";
      if (mode !== "split") sidePane.release(stage);
      if (mode === "split") {
        // Pinned: the stage stays in its row (moving an iframe reloads it), fixed over the
        // side pane's body (side_pane.js place()); never in the top layer.
        if (popover && stage.hasAttribute("popover")) {
          try {
            stage.hidePopover();
          } catch (e) {
            /* already hidden */
          }
          stage.removeAttribute("popover");
        }
        stage.classList.remove("is-floating");
        stage.classList.add("is-pinned");
        frame.fitInline(false);
        if (this.placeholder && this.placeholder.parentNode) this.placeholder.parentNode.removeChild(this.placeholder);
        this.placeholder = this.awayLine("split");
        frame.slot.appendChild(this.placeholder);
      } else if (mode === "inline") {
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
        if (this.placeholder && this.placeholder.parentNode) this.placeholder.parentNode.removeChild(this.placeholder);
        this.placeholder = this.awayLine(mode);
        frame.slot.appendChild(this.placeholder);
      }
    }
    if (container.classList) {
      container.classList.toggle("view-is-pip", mode === "pip");
      container.classList.toggle("view-is-fullscreen", mode === "fullscreen");
      container.classList.toggle("view-is-pinned", mode === "split");
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
          bridge.respond(id, { mode: this.reported() });
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
    cards.displayModeCard(mode, proceed, () => bridge.respond(id, { mode: this.reported() })); // not now: the mode it is in
  }
}
