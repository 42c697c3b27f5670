/* An app view's height and display modes (inline, picture in picture, full screen). */
import { h, icon } from "../dom.js";
import { FLIP_LIMIT, FREEZE_MS, MAX_HEIGHT, MIN_HEIGHT, MODES } from "./config.js";
import { liveAppViews } from "./registry.js";
import { GESTURE_MODES } from "./host_cards.js";
import { clamp, rpcError } from "./rpc.js";

/** A small icon button of an app view's chrome (display modes, close). */
export function iconButton(name, label, onClick, cls) {
  return h("button", { class: "icon-btn icon-btn-sm view-mode-btn" + (cls ? " " + cls : ""), attrs: { type: "button", title: label, "aria-label": label }, on: { click: onClick } }, icon(name, "view-icon"));
}

function onSize(params) {
  if (this.mode !== "inline" || !this.frame) return; // pip / fullscreen: the frame fills its panel
  var wanted = Number(params && params.height);
  if (!isFinite(wanted) || wanted <= 0) return;
  var next = clamp(Math.ceil(wanted), MIN_HEIGHT, MAX_HEIGHT);
  if (Math.abs(next - this.height) < 2) return;
  var now = Date.now();
  if (now < this.frozenUntil) return;
  var dir = next > this.height ? 1 : -1;
  this.flips = this.flips.filter(function (t) {
    return now - t < 1000;
  });
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

function setHeight(px) {
  this.height = px;
  if (this.frame && this.mode === "inline") this.frame.style.height = px + "px";
}

function watchSize() {
  var self = this;
  if (typeof ResizeObserver !== "function" || !this.frame) return;
  var lastWidth = 0;
  var lastHeight = 0;
  var timer = null;
  this.resizeObserver = new ResizeObserver(function (entries) {
    var rect = entries[0].contentRect;
    var widthChanged = Math.abs(rect.width - lastWidth) >= 2;
    var heightChanged = self.mode !== "inline" && Math.abs(rect.height - lastHeight) >= 2;
    if (!widthChanged && !heightChanged) return;
    lastWidth = rect.width;
    lastHeight = rect.height;
    clearTimeout(timer);
    timer = setTimeout(function () {
      self.contextChanged();
    }, 150);
  });
  this.resizeObserver.observe(this.frame);
}

/** Modes this view may be put in: the app's declared list (if any) ∩ the host's. */
function allowedModes() {
  var declared = this.appCaps && Array.isArray(this.appCaps.availableDisplayModes) ? this.appCaps.availableDisplayModes : null;
  if (this.modal) return ["inline"];
  return MODES.filter(function (m) {
    return m === "inline" || !declared || !declared.length || declared.indexOf(m) >= 0;
  });
}

function renderModeButtons() {
  var self = this;
  var allowed = this.allowedModes();
  var make = function (mode, label, name) {
    var b = iconButton(name, label, function () {
      self.setMode(self.mode === mode ? "inline" : mode, "user");
    });
    b.setAttribute("data-mode", mode);
    b.setAttribute("aria-pressed", String(self.mode === mode));
    return b;
  };
  if (this.modesSlot) {
    this.modesSlot.textContent = "";
    if (this.frame) {
      if (allowed.indexOf("pip") >= 0) this.modesSlot.appendChild(make("pip", this.mode === "pip" ? "Return to the chat" : "Picture in picture", "pip"));
      if (allowed.indexOf("fullscreen") >= 0) this.modesSlot.appendChild(make("fullscreen", this.mode === "fullscreen" ? "Exit full screen" : "Full screen", "fullscreen"));
    }
  }
  if (this.stageButtons) {
    this.stageButtons.textContent = "";
    if (this.mode === "pip" && allowed.indexOf("fullscreen") >= 0) this.stageButtons.appendChild(make("fullscreen", "Full screen", "fullscreen"));
    if (this.mode === "fullscreen" && allowed.indexOf("pip") >= 0) this.stageButtons.appendChild(make("pip", "Picture in picture", "pip"));
    if (this.mode !== "inline") {
      var back = iconButton(this.mode === "fullscreen" ? "inline" : "close", this.mode === "fullscreen" ? "Exit full screen (Esc)" : "Return to the chat", function () {
        self.setMode("inline", "user");
        if (self.container.scrollIntoView) self.container.scrollIntoView({ block: "nearest" });
      }, "view-exit");
      this.stageButtons.appendChild(back);
    }
  }
}

/** Host-initiated change (header buttons, Esc) or the outcome of an app request. */
function setMode(mode, source) {
  if (MODES.indexOf(mode) < 0 || mode === this.mode || !this.frame) return this.mode;
  if (mode !== "inline" && this.allowedModes().indexOf(mode) < 0) return this.mode;
  // One floating view per kind at a time.
  var self = this;
  liveAppViews.forEach(function (v) {
    if (v !== self && v.mode === mode) v.setMode("inline", "host");
  });
  this.applyMode(mode);
  this.contextChanged();
  if (source === "user" && mode === "fullscreen") {
    var exit = this.stage && this.stage.querySelector(".view-exit");
    if (exit) exit.focus();
  }
  return this.mode;
}

function applyMode(mode, silent) {
  var prev = this.mode;
  this.mode = mode;
  var stage = this.stage;
  if (stage) {
    stage.setAttribute("data-mode", mode);
    var popover = typeof stage.showPopover === "function";
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
      if (this.frame) this.frame.style.height = this.height + "px";
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
      if (this.frame) this.frame.style.height = "";
      if (!this.placeholder) {
        var self = this;
        this.placeholder = h(
          "div",
          { class: "view-away" },
          h("span", { text: mode === "pip" ? "Shown in picture in picture." : "Shown full screen." }),
          h("button", { class: "btn btn-sm", attrs: { type: "button" }, text: "Bring back here", on: { click: function () { self.setMode("inline", "user"); } } })
        );
        this.slot.appendChild(this.placeholder);
      } else {
        this.placeholder.firstChild.textContent = mode === "pip" ? "Shown in picture in picture." : "Shown full screen.";
      }
    }
  }
  if (this.container.classList) {
    this.container.classList.toggle("view-is-pip", mode === "pip");
    this.container.classList.toggle("view-is-fullscreen", mode === "fullscreen");
  }
  if (!silent) this.renderModeButtons();
  return prev;
}

function requestDisplayMode(id, params) {
  var self = this;
  var mode = params.mode;
  if (MODES.indexOf(mode) < 0) {
    this.respondError(id, { code: -32602, message: "Unknown display mode.", data: { reason: "invalid_display_mode" } });
    return;
  }
  var declared = this.appCaps && Array.isArray(this.appCaps.availableDisplayModes) ? this.appCaps.availableDisplayModes : undefined;
  var proceed = function (gesture) {
    var ask = Object.assign({}, params, { mode: mode, current: self.mode, gesture: gesture });
    if (declared) ask.availableDisplayModes = declared;
    self.forward("ui/request-display-mode", ask).then(
      function (result) {
        var granted = result && MODES.indexOf(result.mode) >= 0 ? result.mode : self.mode;
        if (granted !== self.mode && (granted === "inline" || self.allowedModes().indexOf(granted) >= 0)) self.setMode(granted, "app");
        self.respond(id, { mode: self.mode });
      },
      function (err) {
        self.respondError(id, rpcError(err));
      }
    );
  };
  // Full screen and pip only right after a click or key in this frame (F14); otherwise
  // the host asks, and Allow on its card is the gesture. "inline" never needs one.
  if (mode === this.mode || GESTURE_MODES.indexOf(mode) < 0 || this.allowedModes().indexOf(mode) < 0 || this.frameGesture()) {
    proceed(GESTURE_MODES.indexOf(mode) >= 0 && mode !== this.mode && this.frameGesture() ? "frame" : "");
    return;
  }
  if (this.hostCardsOpen && this.hostCardsOpen["display-mode"]) this.hostCardsOpen["display-mode"].cancel();
  this.displayModeCard(
    mode,
    proceed,
    function () {
      self.respond(id, { mode: self.mode }); // not now: the mode it is in
    }
  );
}

export const displayModeMethods = { onSize, setHeight, watchSize, allowedModes, renderModeButtons, setMode, applyMode, requestDisplayMode };
