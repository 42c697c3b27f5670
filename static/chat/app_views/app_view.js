/* One app view: its frame on the server's sandbox origin, from view.open to live. */
import { h, icon } from "../dom.js";
import { INITIAL_HEIGHT, INNER_SANDBOX, MAX_HEIGHT, MIN_HEIGHT, OUTER_SANDBOX, PROXY_READY_TIMEOUT_MS } from "./config.js";
import { cspDomains, currentTheme, permissionObject } from "./host_context.js";
import { openWhenNear } from "./lazy_open.js";
import { clamp, normalizeError, originOf, request } from "./rpc.js";

/** An app view in `container` (a timeline row, or the dialog of an Apps SDK modal). Its
 *  behaviour is grouped by concern in the sibling modules; index.js assembles it. */
export function AppView(container, call, client, options) {
  options = options || {};
  this.container = container;
  this.call = call;
  this.id = call.id;
  this.client = client;
  this.modal = options.modal || null; // {title, params, parent, dialog}
  this.phase = "idle"; // idle → opening → loading → live | failed | closed
  this.slot = container.querySelector('[data-slot="frame"]') || container;
  this.modesSlot = container.querySelector('[data-slot="display-modes"]');
  this.mode = "inline";
  this.height = INITIAL_HEIGHT;
  this.reset();
}

const documents = new Map(); // document path (content hash) → Promise<html>

function fetchDocument(url) {
  var key;
  try {
    key = new URL(url, window.location.href).pathname; // content-hash URL: immutable
  } catch (e) {
    key = url;
  }
  if (documents.has(key)) return documents.get(key);
  var promise = fetch(url, { credentials: "same-origin", cache: "force-cache" }).then(function (response) {
    if (!response.ok) throw new Error("HTTP " + response.status);
    return response.text();
  });
  documents.set(key, promise);
  promise.catch(function () {
    documents.delete(key);
  });
  return promise;
}

function reset() {
  // A host card answers a request of the document being replaced: it goes with it.
  if (this.closeHostCards) this.closeHostCards();
  this.resourceSent = false;
  this.ready = false;
  this.protocol = null; // "mcp" | "legacy"
  this.appCaps = null;
  this.inputSent = false;
  this.resultKey = null;
  this.cancelSent = false;
  this.partial = null;
  this.partialSent = null;
  this.awaitingFinalInput = false;
  this.lastContext = null;
  this.hostPending = {};
  this.flips = [];
  this.lastDir = 0;
  this.frozenUntil = 0;
  this.logTimes = [];
  this.sizeNotifyTimer = null;
  this.widgetWrites = []; // our setWidgetState values not yet seen back from the server
}

function appName() {
  return (this.reply && this.reply.appName) || (this.call.server && (this.call.server.name || this.call.server.slug)) || "App";
}

function start() {
  this.showLoading();
  if (this.modal) {
    this.open();
    return;
  }
  var self = this;
  var tries = 0;
  (function wait() {
    if (self.phase !== "idle") return;
    if (self.container.isConnected) {
      openWhenNear(self);
      return;
    }
    if (++tries < 120) requestAnimationFrame(wait);
    else openWhenNear(self);
  })();
}

function showLoading() {
  this.slot.textContent = "";
  this.loading = h("div", { class: "view-loading", attrs: { role: "status" } }, h("span", { class: "spinner spinner-sm", attrs: { "aria-hidden": "true" } }), h("span", { text: "Loading " + this.appName() + "…" }));
  this.loading.style.minHeight = this.height + "px";
  this.slot.appendChild(this.loading);
}

function open() {
  var self = this;
  if (this.phase !== "idle" && this.phase !== "failed") return;
  this.phase = "opening";
  request(this.client, { type: "view.open", toolCallId: this.id }).then(
    function (reply) {
      if (self.phase !== "opening") return;
      self.build(reply || {});
    },
    function (err) {
      if (self.phase !== "opening") return;
      self.fail(err);
    }
  );
}

function build(reply) {
  var origin = reply.sandboxOrigin || originOf(reply.sandboxUrl);
  if (!origin || originOf(reply.sandboxUrl) !== origin || origin === window.location.origin || origin === "null") {
    // Never run a view in the app's own origin (security invariant 1).
    this.fail({ code: "sandbox_misconfigured", message: "The sandbox origin is not separate from this site, so the view is not shown." });
    return;
  }
  this.reply = reply;
  this.token = reply.token;
  this.origin = origin;
  this.flavor = reply.flavor || (this.call.view && this.call.view.flavor) || "mcp-app";
  this.appSdk = reply.appSdk === true;
  this.legacy = reply.legacy && typeof reply.legacy === "object" ? reply.legacy : null;
  this.toolInput = reply.toolInput && typeof reply.toolInput === "object" ? reply.toolInput : this.call.arguments || {};
  this.widgetState = reply.widgetState === undefined ? null : reply.widgetState;
  this.pendingResult = reply.toolResult || null;
  this.status = reply.status || this.call.status;
  this.finishedAt = this.call.finishedAt;
  if (this.status === "streaming") {
    // The model is still writing the arguments: what is stored so far is partial.
    this.awaitingFinalInput = true;
    if (!this.partial && reply.toolInput && Object.keys(reply.toolInput).length) this.partial = reply.toolInput;
    this.toolInput = null;
  }
  if (!this.pendingResult) this.absorb(this.call); // an event may have come first
  var preferred = this.legacy && Array.isArray(this.legacy.preferredFrameSize) ? parseInt(this.legacy.preferredFrameSize[1], 10) : NaN;
  if (isFinite(preferred) && /px$|^\d+$/.test(String(this.legacy.preferredFrameSize[1]).trim())) this.height = clamp(preferred, MIN_HEIGHT, MAX_HEIGHT);

  this.phase = "loading";
  var stage = h("div", { class: "view-stage", attrs: { "data-mode": "inline" } });
  var bar = h("div", { class: "view-stage-bar" }, h("span", { class: "view-stage-title", text: this.modal ? this.modal.title || this.appName() : this.appName() }), h("span", { class: "view-spacer" }));
  this.stageButtons = h("span", { class: "view-stage-actions" });
  bar.appendChild(this.stageButtons);
  var frame = document.createElement("iframe");
  frame.className = "view-frame";
  frame.setAttribute("sandbox", OUTER_SANDBOX);
  if (typeof reply.allow === "string" && reply.allow) frame.setAttribute("allow", reply.allow);
  frame.setAttribute("title", this.appName() + " view" + (this.call.tool ? " (" + this.call.tool + ")" : ""));
  frame.setAttribute("referrerpolicy", "no-referrer");
  frame.style.height = this.height + "px";
  this.notice = h("div", { class: "view-notice", attrs: { role: "status", "aria-live": "polite" } });
  this.notice.hidden = true;
  stage.appendChild(bar);
  var prompt = this.modal ? null : this.permissionPrompt(reply.permissionRequest);
  if (prompt) stage.appendChild(prompt);
  stage.appendChild(frame);
  stage.appendChild(this.notice);
  this.stage = stage;
  this.frame = frame;

  if (this.modal) {
    stage.classList.add("is-modal");
  }
  this.slot.textContent = "";
  this.slot.appendChild(stage);
  if (this.loading) {
    this.loadingOverlay = h("div", { class: "view-loading view-loading-overlay", attrs: { role: "status" } }, h("span", { class: "spinner spinner-sm", attrs: { "aria-hidden": "true" } }), h("span", { text: "Loading " + this.appName() + "…" }));
    stage.appendChild(this.loadingOverlay);
  }
  this.renderModeButtons();
  this.watchSize();
  // The message listener is global and already attached; the frame is known to it from
  // here on, before its src is set (pitfall 3).
  // Fetched while the proxy page loads (cached by content hash): the handshake then
  // answers proxy-ready without another round trip.
  if (this.flavor !== "url" && reply.documentUrl) fetchDocument(reply.documentUrl).catch(function () {});
  // The proxy document starts in the host's theme (its color-scheme; docs/sandbox.md).
  frame.src = reply.sandboxUrl + (reply.sandboxUrl.indexOf("?") < 0 ? "?" : "&") + "theme=" + currentTheme();
  var self = this;
  this.readyTimer = setTimeout(function () {
    if (!self.resourceSent && self.phase === "loading") self.fail({ code: "sandbox_timeout", message: "The view's sandbox did not load." });
  }, PROXY_READY_TIMEOUT_MS);
}

function fail(err) {
  err = err && err.code ? err : normalizeError(err);
  this.phase = "failed";
  this.removeFrame();
  clearTimeout(this.readyTimer);
  var unsupported = err.code === "view_not_supported";
  var retryable = ["not_found", "no_view", "view_not_supported", "forbidden", "scope_mismatch", "binding_disabled", "no_binding", "sandbox_misconfigured"].indexOf(err.code) < 0;
  var self = this;
  var text = this.call.textFallback || ""; // the server's (chat/presenters.py)
  var card = h(
    "div",
    { class: "view-fallback" + (unsupported ? " is-unsupported" : " is-error"), attrs: { role: "note" } },
    h("div", { class: "view-fallback-head" }, icon("alert", "view-icon"), h("strong", { text: unsupported ? "This view type is not supported" : "The view could not be shown" })),
    h("p", { class: "view-fallback-reason", text: err.message || "Unknown error." }),
    err.code ? h("code", { class: "view-fallback-code", text: err.code }) : null,
    text ? h("div", { class: "view-fallback-label", text: "Text result" }) : null,
    text ? h("div", { class: "view-fallback-text text-block", text: text }) : null,
    retryable
      ? h(
          "button",
          {
            class: "btn btn-sm view-retry",
            attrs: { type: "button" },
            on: {
              click: function () {
                self.reset();
                self.phase = "idle";
                self.showLoading();
                self.open();
              },
            },
          },
          icon("reload", "view-icon"),
          "Try again"
        )
      : null
  );
  this.slot.textContent = "";
  this.slot.appendChild(card);
  if (this.container.classList) this.container.classList.add("view-failed");
}

function removeFrame() {
  this.closeHostCards();
  if (this.mode !== "inline") this.applyMode("inline", true);
  if (this.resizeObserver) this.resizeObserver.disconnect();
  this.resizeObserver = null;
  if (this.frame) {
    this.frame.removeAttribute("src");
    if (this.frame.parentNode) this.frame.parentNode.removeChild(this.frame);
  }
  this.frame = null;
  if (this.stage && this.stage.parentNode) this.stage.parentNode.removeChild(this.stage);
  this.stage = null;
  if (this.modesSlot) this.modesSlot.textContent = "";
}

function onProxyReady() {
  var self = this;
  if (this.resourceSent) {
    // The proxy page loaded again (the frame was moved or reloaded): start over.
    this.reset();
  }
  this.resourceSent = true;
  clearTimeout(this.readyTimer);
  var reply = this.reply;
  var html = this.flavor === "url" || !reply.documentUrl ? Promise.resolve("") : fetchDocument(reply.documentUrl);
  html.then(
    function (text) {
      if (!self.frame) return;
      var ctx = self.hostContext();
      var params = {
        html: text,
        sandbox: INNER_SANDBOX,
        csp: cspDomains(reply.csp),
        permissions: permissionObject(reply.permissions),
        appSdk: self.appSdk,
        flavor: self.flavor,
        title: self.appName() + " view",
        theme: ctx.theme,
      };
      if (self.appSdk) {
        var result = self.pendingResult;
        params.toolInput = self.toolInput;
        params.toolOutput = result && result.structuredContent !== undefined ? result.structuredContent : null;
        params.toolResponseMetadata = result && result._meta ? result._meta : null;
        params.widgetState = self.widgetState;
        params.theme = ctx.theme;
        params.locale = ctx.locale;
        params.displayMode = ctx.displayMode;
        params.maxHeight = ctx.containerDimensions.maxHeight || ctx.containerDimensions.height;
        params.safeArea = { insets: { top: 0, bottom: 0, left: 0, right: 0 } };
        params.userAgent = { device: { type: ctx.deviceCapabilities.touch && !ctx.deviceCapabilities.hover ? "mobile" : "desktop" }, capabilities: ctx.deviceCapabilities };
        params.view = self.modal ? { mode: "modal", params: self.modal.params === undefined ? null : self.modal.params } : { mode: "inline", params: null };
      }
      self.post({ jsonrpc: "2.0", method: "ui/notifications/sandbox-resource-ready", params: params });
      self.phase = "live";
      if (self.loadingOverlay && self.loadingOverlay.parentNode) self.loadingOverlay.parentNode.removeChild(self.loadingOverlay);
      self.loadingOverlay = null;
    },
    function (err) {
      self.fail({ code: "document_unavailable", message: "The view's document could not be loaded (" + (err && err.message ? err.message : "network error") + ")." });
    }
  );
}

export const frameMethods = { reset, appName, start, showLoading, open, build, fail, removeFrame, onProxyReady };
