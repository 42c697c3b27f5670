/*
 * Atrium view host: renders MCP Apps (and legacy MCP-UI / Apps SDK views) in the thread.
 *
 *   window.AtriumViews.mount(container, toolCallPayload, client)
 *   window.AtriumViews.update(container, toolCallPayload, client)
 *   window.AtriumViews.unmount(container) → Promise (after ui/resource-teardown, ≤ 3 s)
 *
 * Design (DESIGN §7-§8, docs/view-bridge.md, reference/mcp-apps-host.md):
 * - Lazy: a view opens only when its row comes within ~600 px of the visible timeline.
 * - `view.open` over the thread socket returns a capability token and the sandbox proxy
 *   URL on the view's server's own sandbox origin (docs/sandbox.md). The outer frame is
 *   `allow-scripts allow-same-origin allow-forms` on that origin; the proxy puts the app
 *   into the spec's inner frame (`allow-scripts allow-same-origin`, + forms) on the same
 *   origin. No popups and no modal dialogs: links go through `ui/open-link`, which the
 *   server checks. The host trusts neither proxy nor view: the server decides.
 * - One window `message` listener, attached at load (before any frame exists). A message
 *   is accepted only when `event.source` is one of our frames' windows AND its origin is
 *   that frame's sandbox origin. `event.source === window` is never trusted.
 * - S3 handshake: proxy-ready → the host fetches the immutable document URL and answers
 *   sandbox-resource-ready. JSON-RPC 2.0 with the view afterwards; nothing is sent to the
 *   view before `ui/notifications/initialized` (early requests are answered).
 * - Every app request goes to the server (`view.request`); the server decides and audits.
 *   Only presentational bits are local: ui/initialize, size changes, display modes (which
 *   the server still arbitrates for app requests), the Apps SDK modal.
 * - Legacy MCP-UI `{type, messageId, payload}` messages are translated into the same
 *   requests (tagged `_compat: "legacy"`); Apps SDK widgets get `window.openai` from the
 *   shim the proxy injects (templates/sandbox/openai-shim.js).
 */
(function () {
  "use strict";

  var HOST_INFO = { name: "Atrium", version: "1.0.0" };
  var PROTOCOL_VERSION = "2026-01-26";
  var KNOWN_PROTOCOLS = ["2026-01-26", "2025-11-21"];
  var OUTER_SANDBOX = "allow-scripts allow-same-origin allow-forms";
  var INNER_SANDBOX = "allow-scripts allow-same-origin allow-forms";
  var MODES = ["inline", "fullscreen", "pip"];
  var MIN_HEIGHT = 60;
  var MAX_HEIGHT = 4000;
  var INITIAL_HEIGHT = 180;
  var LAZY_MARGIN = "600px 0px 600px 0px";
  var TEARDOWN_WAIT_MS = 3000;
  var VIEW_CALL_WAIT_MS = 15 * 60 * 1000 + 30000; // the server's VIEW_CALL_WAIT, and a margin
  var PROXY_READY_TIMEOUT_MS = 20000;
  var FLIP_LIMIT = 4; // direction changes per second before the height freezes
  var FREEZE_MS = 2000;
  var LOG_BURST = 20; // notifications/message per 10 s per view
  var BAD_SCHEMES = ["javascript:", "data:", "file:", "vbscript:", "blob:", "about:", "chrome:", "filesystem:"];
  var FINAL = ["success", "error", "cancelled", "rejected"];

  var views = []; // every live View
  var subscribed = typeof WeakSet === "function" ? new WeakSet() : null;
  var observers = new Map(); // scroll root → IntersectionObserver
  var documents = new Map(); // document path (content hash) → Promise<html>
  var hostSeq = 0;

  // ---- small helpers -------------------------------------------------------------------

  function h(tag, props) {
    var el = document.createElement(tag);
    props = props || {};
    if (props.cls) el.className = props.cls;
    if (props.text !== undefined) el.textContent = props.text;
    if (props.attrs) {
      Object.keys(props.attrs).forEach(function (k) {
        if (props.attrs[k] !== null && props.attrs[k] !== undefined) el.setAttribute(k, props.attrs[k]);
      });
    }
    if (props.on) {
      Object.keys(props.on).forEach(function (k) {
        el.addEventListener(k, props.on[k]);
      });
    }
    for (var i = 2; i < arguments.length; i++) {
      var child = arguments[i];
      if (child === null || child === undefined || child === false) continue;
      el.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return el;
  }

  var ICONS = {
    pip: "M3 5h18v14H3zM12 12h7v5h-7z",
    fullscreen: "M4 9V4h5M20 9V4h-5M4 15v5h5M20 15v5h-5",
    inline: "M9 4v5H4M15 4v5h5M9 20v-5H4M15 20v-5h5",
    close: "M6 6l12 12M18 6 6 18",
    alert: "M12 8v5M12 16.5v.5M10.3 3.9 2.4 18a2 2 0 0 0 1.7 3h15.8a2 2 0 0 0 1.7-3L13.7 3.9a2 2 0 0 0-3.4 0z",
    external: "M14 4h6v6M20 4l-9 9M18 14v5a1 1 0 0 1-1 1H5a1 1 0 0 1-1-1V7a1 1 0 0 1 1-1h5",
    reload: "M20 11a8 8 0 1 0-2.3 5.7M20 4v7h-7",
    shield: "M12 3 4.5 6v5.5c0 4.6 3.2 8.3 7.5 9.5 4.3-1.2 7.5-4.9 7.5-9.5V6L12 3z",
  };

  function icon(name) {
    var ns = "http://www.w3.org/2000/svg";
    var svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("width", "15");
    svg.setAttribute("height", "15");
    svg.setAttribute("aria-hidden", "true");
    svg.setAttribute("class", "icon view-icon");
    var path = document.createElementNS(ns, "path");
    path.setAttribute("d", ICONS[name] || "");
    svg.appendChild(path);
    return svg;
  }

  function iconButton(name, label, onClick, cls) {
    var b = h("button", { cls: "icon-btn icon-btn-sm view-mode-btn" + (cls ? " " + cls : ""), attrs: { type: "button", title: label, "aria-label": label }, on: { click: onClick } }, icon(name));
    return b;
  }

  function same(a, b) {
    if (a === b) return true;
    try {
      return JSON.stringify(a) === JSON.stringify(b);
    } catch (e) {
      return false;
    }
  }

  function clamp(v, lo, hi) {
    return Math.max(lo, Math.min(hi, v));
  }

  function originOf(url) {
    try {
      return new URL(url, window.location.href).origin;
    } catch (e) {
      return null;
    }
  }

  function dataOf(arg) {
    // client.on handlers get (data, frame); be lenient with (frame).
    if (arg && typeof arg === "object" && arg.kind && arg.data && typeof arg.seq === "number") return arg.data;
    return arg;
  }

  /** client.send → the reply's result, or a rejection with {code, message, jsonrpcCode}. */
  function request(client, msg) {
    // A view's tools/call may wait for a member's approval: as long as the server does.
    var opts = msg && msg.method === "tools/call" ? { timeoutMs: VIEW_CALL_WAIT_MS } : undefined;
    return Promise.resolve()
      .then(function () {
        return client.send(msg, opts);
      })
      .then(
        function (reply) {
          if (reply && typeof reply === "object" && (reply.type === "reply" || (typeof reply.ok === "boolean" && ("result" in reply || "error" in reply)))) {
            if (reply.ok === false) throw normalizeError(reply.error);
            return reply.result;
          }
          return reply;
        },
        function (err) {
          throw normalizeError(err && err.error ? err.error : err);
        }
      );
  }

  function normalizeError(err) {
    if (err && typeof err === "object" && !(err instanceof Error)) {
      return { code: String(err.code || "error"), message: String(err.message || "The request failed."), jsonrpcCode: typeof err.jsonrpcCode === "number" ? err.jsonrpcCode : null, details: err.details };
    }
    return { code: "unavailable", message: (err && err.message) || "The server did not answer.", jsonrpcCode: null };
  }

  function rpcError(err) {
    return { code: typeof err.jsonrpcCode === "number" ? err.jsonrpcCode : -32000, message: err.message, data: { reason: err.code } };
  }

  function currentTheme() {
    return document.documentElement.getAttribute("data-theme") === "dark" ? "dark" : "light";
  }

  // MCP Apps style tokens ← the host page's tokens (static/chat/app.css); the MCP name
  // itself wins when the page defines it.
  var STYLE_SOURCES = {
    "--color-background-primary": ["--surface", "--bg"],
    "--color-background-secondary": ["--surface-2", "--bg-subtle"],
    "--color-background-tertiary": ["--surface-3"],
    "--color-background-inverse": ["--text"],
    "--color-background-ghost": ["--bg-hover"],
    "--color-background-info": ["--accent-soft"],
    "--color-background-danger": ["--red-soft"],
    "--color-background-success": ["--green-soft"],
    "--color-background-warning": ["--amber-soft"],
    "--color-background-disabled": ["--surface-3"],
    "--color-text-primary": ["--text"],
    "--color-text-secondary": ["--muted", "--text-2"],
    "--color-text-tertiary": ["--faint"],
    "--color-text-inverse": ["--bg"],
    "--color-text-ghost": ["--faint"],
    "--color-text-info": ["--accent-text"],
    "--color-text-danger": ["--red"],
    "--color-text-success": ["--green"],
    "--color-text-warning": ["--amber"],
    "--color-text-disabled": ["--faint"],
    "--color-border-primary": ["--border"],
    "--color-border-secondary": ["--border-strong"],
    "--color-border-tertiary": ["--border"],
    "--color-border-inverse": ["--text"],
    "--color-border-ghost": ["--bg-hover"],
    "--color-border-info": ["--accent"],
    "--color-border-danger": ["--red"],
    "--color-border-success": ["--green"],
    "--color-border-warning": ["--amber"],
    "--color-border-disabled": ["--border"],
    "--color-ring-primary": ["--accent"],
    "--color-ring-secondary": ["--border-strong"],
    "--color-ring-inverse": ["--bg"],
    "--color-ring-info": ["--accent"],
    "--color-ring-danger": ["--red"],
    "--color-ring-success": ["--green"],
    "--color-ring-warning": ["--amber"],
    "--font-sans": ["--font-sans"],
    "--font-mono": ["--font-mono"],
    "--border-radius-xs": ["--radius-xs"],
    "--border-radius-sm": ["--radius-sm"],
    "--border-radius-md": ["--radius"],
    "--border-radius-lg": ["--radius-lg"],
    "--border-radius-xl": ["--radius-xl"],
    "--shadow-sm": ["--shadow-sm"],
    "--shadow-md": ["--shadow"],
    "--shadow-lg": ["--shadow-lg"],
  };
  var STYLE_CONSTANTS = {
    "--font-weight-normal": "400",
    "--font-weight-medium": "500",
    "--font-weight-semibold": "600",
    "--font-weight-bold": "700",
    "--font-text-xs-size": "11px",
    "--font-text-sm-size": "12.5px",
    "--font-text-md-size": "14px",
    "--font-text-lg-size": "16px",
    "--font-heading-xs-size": "13px",
    "--font-heading-sm-size": "15px",
    "--font-heading-md-size": "17px",
    "--font-heading-lg-size": "20px",
    "--font-heading-xl-size": "24px",
    "--font-heading-2xl-size": "30px",
    "--font-heading-3xl-size": "36px",
    "--font-text-xs-line-height": "1.4",
    "--font-text-sm-line-height": "1.45",
    "--font-text-md-line-height": "1.5",
    "--font-text-lg-line-height": "1.5",
    "--font-heading-xs-line-height": "1.3",
    "--font-heading-sm-line-height": "1.3",
    "--font-heading-md-line-height": "1.25",
    "--font-heading-lg-line-height": "1.2",
    "--font-heading-xl-line-height": "1.2",
    "--font-heading-2xl-line-height": "1.15",
    "--font-heading-3xl-line-height": "1.1",
    "--border-radius-full": "9999px",
    "--border-width-regular": "1px",
  };

  function hostStyles() {
    var computed = window.getComputedStyle(document.documentElement);
    var variables = {};
    Object.keys(STYLE_SOURCES).forEach(function (name) {
      var candidates = [name].concat(STYLE_SOURCES[name]);
      for (var i = 0; i < candidates.length; i++) {
        var value = computed.getPropertyValue(candidates[i]).trim();
        if (value) {
          variables[name] = value;
          return;
        }
      }
    });
    Object.keys(STYLE_CONSTANTS).forEach(function (name) {
      variables[name] = computed.getPropertyValue(name).trim() || STYLE_CONSTANTS[name];
    });
    if (variables["--color-border-primary"]) variables["--shadow-hairline"] = "0 0 0 1px " + variables["--color-border-primary"];
    return { variables: variables };
  }

  function deviceCapabilities() {
    var mq = function (q) {
      return !!(window.matchMedia && window.matchMedia(q).matches);
    };
    return { touch: mq("(pointer: coarse)") || (navigator.maxTouchPoints || 0) > 0, hover: mq("(hover: hover)") };
  }

  function locale() {
    return document.documentElement.lang && document.documentElement.lang.length > 1 ? navigator.language || document.documentElement.lang : navigator.language || "en-US";
  }

  function timeZone() {
    try {
      return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
    } catch (e) {
      return "UTC";
    }
  }

  /** The effective CSP header → McpUiResourceCsp-shaped domains (hostCapabilities.sandbox.csp). */
  function cspDomains(header) {
    var out = { connectDomains: [], resourceDomains: [], frameDomains: [], baseUriDomains: [] };
    var map = { "connect-src": "connectDomains", "script-src": "resourceDomains", "style-src": "resourceDomains", "img-src": "resourceDomains", "font-src": "resourceDomains", "media-src": "resourceDomains", "frame-src": "frameDomains", "base-uri": "baseUriDomains" };
    String(header || "")
      .split(";")
      .forEach(function (directive) {
        var parts = directive.trim().split(/\s+/);
        var key = map[(parts.shift() || "").toLowerCase()];
        if (!key) return;
        parts.forEach(function (token) {
          if (!token || token.charAt(0) === "'" || /^[a-z]+:$/i.test(token) || token === "*") return;
          if (out[key].indexOf(token) < 0) out[key].push(token);
        });
      });
    return out;
  }

  var PERMISSION_NAMES = ["camera", "microphone", "geolocation", "clipboardWrite"];
  function permissionObject(granted) {
    var out = {};
    (Array.isArray(granted) ? granted : []).forEach(function (name) {
      if (PERMISSION_NAMES.indexOf(name) >= 0) out[name] = {};
    });
    return out;
  }

  var ANNOTATION_KEYS = { title: "string", readOnlyHint: "boolean", destructiveHint: "boolean", idempotentHint: "boolean", openWorldHint: "boolean" };
  function toolInfo(info) {
    if (!info || typeof info !== "object" || !info.tool) return undefined;
    var tool = info.tool;
    var schema = tool.inputSchema && typeof tool.inputSchema === "object" && tool.inputSchema.type === "object" ? tool.inputSchema : { type: "object" };
    var out = { name: String(tool.name || ""), inputSchema: schema };
    if (typeof tool.title === "string" && tool.title) out.title = tool.title;
    if (typeof tool.description === "string" && tool.description) out.description = tool.description;
    if (tool.annotations && typeof tool.annotations === "object") {
      var ann = {};
      Object.keys(ANNOTATION_KEYS).forEach(function (k) {
        if (typeof tool.annotations[k] === ANNOTATION_KEYS[k]) ann[k] = tool.annotations[k];
      });
      out.annotations = ann;
    }
    var result = { tool: out };
    if (typeof info.id === "number" || typeof info.id === "string") result.id = info.id;
    return result;
  }

  /** A whole CallToolResult from a canonical result (mirrors chat/view_bridge.call_tool_result). */
  function callToolResult(canonical) {
    if (!canonical || typeof canonical !== "object") return null;
    var content = [];
    (canonical.parts || []).forEach(function (part) {
      if (!part || typeof part !== "object") return;
      if (part.type === "text") {
        content.push({ type: "text", text: String(part.text || "") });
        return;
      }
      if ((part.type === "image" || part.type === "file") && typeof part.src === "string") {
        var m = /^data:([^;,]+);base64,(.*)$/.exec(part.src);
        var kind = part.type === "file" ? part.mediaKind || "image" : "image";
        if (m && (kind === "image" || kind === "audio")) {
          content.push({ type: kind, mimeType: m[1], data: m[2] });
          return;
        }
      }
      if (part.type === "link" && part.uri) {
        content.push({ type: "resource_link", uri: part.uri, name: part.name || part.uri });
        return;
      }
      if (part.type === "ui") return;
      var label = describePart(part);
      if (label) content.push({ type: "text", text: label });
    });
    var meta = canonical.meta && typeof canonical.meta === "object" ? canonical.meta : {};
    var result = { content: content, isError: !!meta.isError };
    if (canonical.structured !== null && canonical.structured !== undefined) result.structuredContent = canonical.structured;
    if (canonical.uiMeta && typeof canonical.uiMeta === "object" && Object.keys(canonical.uiMeta).length) result._meta = canonical.uiMeta;
    return result;
  }

  function describePart(part) {
    if (part.type === "image" || part.type === "file") {
      var label = part.type === "image" ? "image" : { image: "image", audio: "audio", video: "video" }[part.mediaKind] || "file";
      var details = [part.mimeType, part.filename].filter(function (x) {
        return typeof x === "string" && x;
      });
      return "[" + label + (details.length ? ": " + details.join(", ") : "") + "]";
    }
    if (part.type === "error") return part.message ? "[error: " + part.message + "]" : "[error]";
    return null;
  }

  function textFallback(call) {
    var parts = (call && call.result && call.result.parts) || [];
    return parts
      .filter(function (p) {
        return p && p.type === "text" && typeof p.text === "string";
      })
      .map(function (p) {
        return p.text;
      })
      .join("\n\n");
  }

  function sanitizeFilename(name) {
    var base = String(name || "")
      .split(/[\\/]/)
      .pop();
    try {
      base = decodeURIComponent(base);
    } catch (e) {
      /* keep as is */
    }
    base = base
      .replace(/[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069]/g, "")
      .replace(/[\\/:*?"<>|]/g, "_")
      .replace(/^[.\s]+/, "")
      .replace(/[.\s]+$/, "")
      .trim();
    if (base.length > 120) {
      var dot = base.lastIndexOf(".");
      var ext = dot > 0 && base.length - dot <= 10 ? base.slice(dot) : "";
      base = base.slice(0, 120 - ext.length) + ext;
    }
    return base || "download";
  }

  function scrollRoot(el) {
    var node = el.parentElement;
    while (node && node !== document.body && node !== document.documentElement) {
      var style = window.getComputedStyle(node);
      if (/(auto|scroll|overlay)/.test(style.overflowY)) return node;
      node = node.parentElement;
    }
    return null;
  }

  function observe(view) {
    if (typeof IntersectionObserver !== "function") {
      view.open();
      return;
    }
    var root = scrollRoot(view.container);
    var observer = observers.get(root);
    if (!observer) {
      observer = new IntersectionObserver(
        function (entries) {
          entries.forEach(function (entry) {
            if (!entry.isIntersecting) return;
            observer.unobserve(entry.target);
            var v = viewForContainer(entry.target);
            if (v && v.phase === "idle") v.open();
          });
        },
        { root: root, rootMargin: LAZY_MARGIN }
      );
      observers.set(root, observer);
    }
    view.observer = observer;
    observer.observe(view.container);
  }

  function viewForContainer(container) {
    for (var i = 0; i < views.length; i++) if (views[i].container === container) return views[i];
    return null;
  }

  // ---- a view ---------------------------------------------------------------------------

  function View(container, call, client, options) {
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

  View.prototype.reset = function () {
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
  };

  View.prototype.appName = function () {
    return (this.reply && this.reply.appName) || (this.call.server && (this.call.server.name || this.call.server.slug)) || "App";
  };

  View.prototype.start = function () {
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
        observe(self);
        return;
      }
      if (++tries < 120) requestAnimationFrame(wait);
      else observe(self);
    })();
  };

  View.prototype.showLoading = function () {
    this.slot.textContent = "";
    this.loading = h("div", { cls: "view-loading", attrs: { role: "status" } }, h("span", { cls: "spinner spinner-sm", attrs: { "aria-hidden": "true" } }), h("span", { text: "Loading " + this.appName() + "…" }));
    this.loading.style.minHeight = this.height + "px";
    this.slot.appendChild(this.loading);
  };

  View.prototype.open = function () {
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
  };

  View.prototype.build = function (reply) {
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
    var stage = h("div", { cls: "view-stage", attrs: { "data-mode": "inline" } });
    var bar = h("div", { cls: "view-stage-bar" }, h("span", { cls: "view-stage-title", text: this.modal ? this.modal.title || this.appName() : this.appName() }), h("span", { cls: "view-spacer" }));
    this.stageButtons = h("span", { cls: "view-stage-actions" });
    bar.appendChild(this.stageButtons);
    var frame = document.createElement("iframe");
    frame.className = "view-frame";
    frame.setAttribute("sandbox", OUTER_SANDBOX);
    if (typeof reply.allow === "string" && reply.allow) frame.setAttribute("allow", reply.allow);
    frame.setAttribute("title", this.appName() + " view" + (this.call.tool ? " (" + this.call.tool + ")" : ""));
    frame.setAttribute("referrerpolicy", "no-referrer");
    frame.style.height = this.height + "px";
    this.notice = h("div", { cls: "view-notice", attrs: { role: "status", "aria-live": "polite" } });
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
      this.loadingOverlay = h("div", { cls: "view-loading view-loading-overlay", attrs: { role: "status" } }, h("span", { cls: "spinner spinner-sm", attrs: { "aria-hidden": "true" } }), h("span", { text: "Loading " + this.appName() + "…" }));
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
  };

  View.prototype.fail = function (err) {
    err = err && err.code ? err : normalizeError(err);
    this.phase = "failed";
    this.removeFrame();
    clearTimeout(this.readyTimer);
    var unsupported = err.code === "view_not_supported";
    var retryable = ["not_found", "no_view", "view_not_supported", "forbidden", "scope_mismatch", "binding_disabled", "no_binding", "sandbox_misconfigured"].indexOf(err.code) < 0;
    var self = this;
    var text = textFallback(this.call);
    var card = h(
      "div",
      { cls: "view-fallback" + (unsupported ? " is-unsupported" : " is-error"), attrs: { role: "note" } },
      h("div", { cls: "view-fallback-head" }, icon("alert"), h("strong", { text: unsupported ? "This view type is not supported" : "The view could not be shown" })),
      h("p", { cls: "view-fallback-reason", text: err.message || "Unknown error." }),
      err.code ? h("code", { cls: "view-fallback-code", text: err.code }) : null,
      text ? h("div", { cls: "view-fallback-label", text: "Text result" }) : null,
      text ? h("div", { cls: "view-fallback-text text-block", text: text }) : null,
      retryable
        ? h(
            "button",
            {
              cls: "btn btn-sm view-retry",
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
            icon("reload"),
            "Try again"
          )
        : null
    );
    this.slot.textContent = "";
    this.slot.appendChild(card);
    if (this.container.classList) this.container.classList.add("view-failed");
  };

  View.prototype.removeFrame = function () {
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
  };

  // ---- messages from the frame -----------------------------------------------------------

  View.prototype.post = function (message) {
    if (!this.frame || !this.frame.contentWindow) return;
    try {
      this.frame.contentWindow.postMessage(message, this.origin);
    } catch (e) {
      console.error("Atrium: could not post to a view", e);
    }
  };

  View.prototype.respond = function (id, result) {
    this.post({ jsonrpc: "2.0", id: id, result: result === undefined ? {} : result });
  };

  View.prototype.respondError = function (id, error) {
    this.post({ jsonrpc: "2.0", id: id, error: error });
  };

  View.prototype.onMessage = function (data) {
    if (!data || typeof data !== "object") return;
    if (data.jsonrpc === "2.0") this.onRpc(data);
    else if (typeof data.type === "string") this.onLegacy(data);
  };

  View.prototype.onRpc = function (msg) {
    var hasId = msg.id !== undefined && msg.id !== null;
    var params = msg.params && typeof msg.params === "object" && !Array.isArray(msg.params) ? msg.params : {};
    if (typeof msg.method === "string") {
      if (hasId) this.onRequest(msg.id, msg.method, params);
      else this.onNotification(msg.method, params);
      return;
    }
    if (hasId && Object.prototype.hasOwnProperty.call(this.hostPending, msg.id)) {
      var done = this.hostPending[msg.id];
      delete this.hostPending[msg.id];
      done(msg);
    }
  };

  View.prototype.onNotification = function (method, params) {
    switch (method) {
      case "ui/notifications/sandbox-proxy-ready":
        this.onProxyReady();
        return;
      case "ui/notifications/initialized":
        this.protocol = this.protocol || "mcp";
        this.markReady();
        return;
      case "ui/notifications/size-changed":
        this.onSize(params);
        this.notifyServer(method, params, true);
        return;
      case "notifications/message":
        if (this.allowLog()) this.notifyServer(method, params);
        return;
      case "ui/notifications/request-teardown":
        this.notifyServer(method, params);
        this.honourTeardown();
        return;
      default:
        return; // other notifications have no host meaning
    }
  };

  View.prototype.onRequest = function (id, method, params) {
    var self = this;
    switch (method) {
      case "ui/initialize":
        this.protocol = "mcp";
        this.appCaps = params.appCapabilities && typeof params.appCapabilities === "object" ? params.appCapabilities : {};
        this.appInfo = params.appInfo;
        var version = KNOWN_PROTOCOLS.indexOf(params.protocolVersion) >= 0 ? params.protocolVersion : PROTOCOL_VERSION;
        var context = this.hostContext();
        this.lastContext = context;
        this.respond(id, { protocolVersion: version, hostInfo: HOST_INFO, hostCapabilities: this.hostCapabilities(), hostContext: context });
        this.renderModeButtons();
        return;
      case "ui/request-display-mode":
        this.requestDisplayMode(id, params);
        return;
      case "ui/open-link":
        this.openLink(id, params);
        return;
      case "ui/download-file":
        this.download(id, params);
        return;
      case "openai/requestModal":
        this.openModal(id, params);
        return;
      case "atrium/setWidgetState":
        this.widgetState = params.state === undefined ? null : params.state;
        break;
      default:
        break;
    }
    this.forward(method, params).then(
      function (result) {
        self.respond(id, result);
      },
      function (err) {
        self.respondError(id, rpcError(err));
      }
    );
  };

  /** A view request → the server (view.request). Retries once with a fresh token. */
  View.prototype.forward = function (method, params, retried) {
    var self = this;
    if (!this.token) return Promise.reject({ code: "not_ready", message: "The view is not open.", jsonrpcCode: -32000 });
    return request(this.client, { type: "view.request", token: this.token, method: method, params: params || {} }).catch(function (err) {
      if (err.code === "invalid_token" && !retried && !self.closed) {
        return self.refreshToken().then(function () {
          return self.forward(method, params, true);
        });
      }
      throw err;
    });
  };

  View.prototype.refreshToken = function () {
    var self = this;
    return request(this.client, { type: "view.open", toolCallId: this.id }).then(function (reply) {
      if (reply && reply.token) self.token = reply.token;
    });
  };

  View.prototype.notifyServer = function (method, params, throttled) {
    var self = this;
    var send = function () {
      if (!self.token) return;
      request(self.client, { type: "view.notify", token: self.token, method: method, params: params || {} }).catch(function () {});
    };
    if (!throttled) {
      send();
      return;
    }
    // Size reports can come in bursts: tell the server at most once a second (the last one).
    this.pendingSize = params;
    if (this.sizeNotifyTimer) return;
    this.sizeNotifyTimer = setTimeout(function () {
      self.sizeNotifyTimer = null;
      params = self.pendingSize;
      send();
    }, 1000);
  };

  View.prototype.allowLog = function () {
    var now = Date.now();
    this.logTimes = this.logTimes.filter(function (t) {
      return now - t < 10000;
    });
    if (this.logTimes.length >= LOG_BURST) return false;
    this.logTimes.push(now);
    return true;
  };

  // ---- S3 handshake --------------------------------------------------------------------------

  View.prototype.onProxyReady = function () {
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
  };

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

  // ---- host context ------------------------------------------------------------------------------

  View.prototype.dimensions = function () {
    var rect = this.frame ? this.frame.getBoundingClientRect() : { width: 0, height: 0 };
    var width = Math.round(rect.width) || Math.round(this.slot.getBoundingClientRect().width) || 600;
    if (this.mode === "inline") return { width: width, maxHeight: MAX_HEIGHT };
    return { width: width, height: Math.round(rect.height) || 300 };
  };

  View.prototype.hostContext = function () {
    var ctx = {
      theme: currentTheme(),
      styles: hostStyles(),
      displayMode: this.mode,
      availableDisplayModes: MODES.slice(),
      containerDimensions: this.dimensions(),
      locale: locale(),
      timeZone: timeZone(),
      userAgent: "Atrium/" + HOST_INFO.version + " (web)",
      platform: "web",
      deviceCapabilities: deviceCapabilities(),
      safeAreaInsets: { top: 0, right: 0, bottom: 0, left: 0 },
    };
    var info = toolInfo(this.reply && this.reply.toolInfo);
    if (info) ctx.toolInfo = info;
    return ctx;
  };

  View.prototype.hostCapabilities = function () {
    return {
      openLinks: {},
      downloadFile: {},
      serverTools: {},
      serverResources: {},
      logging: {},
      updateModelContext: { text: {}, structuredContent: {} },
      message: { text: {} },
      sandbox: { permissions: permissionObject(this.reply && this.reply.permissions), csp: cspDomains(this.reply && this.reply.csp) },
    };
  };

  /** Tell a ready view what changed (only the keys that did). */
  View.prototype.contextChanged = function () {
    if (!this.ready) return;
    if (this.protocol === "legacy") {
      this.sendRenderData();
      return;
    }
    var ctx = this.hostContext();
    var prev = this.lastContext || {};
    var delta = {};
    ["theme", "styles", "displayMode", "containerDimensions", "locale", "timeZone"].forEach(function (k) {
      if (!same(ctx[k], prev[k])) delta[k] = ctx[k];
    });
    this.lastContext = ctx;
    if (Object.keys(delta).length) this.post({ jsonrpc: "2.0", method: "ui/notifications/host-context-changed", params: delta });
  };

  // ---- lifecycle: input, result, cancellation -----------------------------------------------

  View.prototype.markReady = function () {
    if (this.ready) return;
    this.ready = true;
    this.renderModeButtons();
    if (this.protocol === "mcp" && this.lastContext) this.contextChanged(); // changes since initialize
    this.sync();
  };

  /** Send whatever the view is owed: tool-input once, then the result or the cancellation. */
  View.prototype.sync = function () {
    if (!this.ready || !this.frame) return;
    if (this.protocol === "legacy") {
      if (this.pendingResult && this.resultKey !== this.pendingResultKey()) {
        this.resultKey = this.pendingResultKey();
        this.sendRenderData();
      }
      return;
    }
    if (!this.inputSent) {
      if (this.awaitingFinalInput) {
        if (this.cancelReason !== undefined) {
          // Ended before its arguments were complete: no tool-input, only the cancellation.
          if (!this.cancelSent) {
            this.cancelSent = true;
            this.post({ jsonrpc: "2.0", method: "ui/notifications/tool-cancelled", params: this.cancelReason ? { reason: this.cancelReason } : {} });
          }
          return;
        }
        if (this.partial && this.partialSent !== this.partial) {
          this.partialSent = this.partial;
          this.post({ jsonrpc: "2.0", method: "ui/notifications/tool-input-partial", params: { arguments: this.partial } });
        }
        return;
      }
      this.inputSent = true;
      this.post({ jsonrpc: "2.0", method: "ui/notifications/tool-input", params: { arguments: this.toolInput || {} } });
    }
    if (this.pendingResult) {
      var key = this.pendingResultKey();
      if (this.resultKey !== key) {
        this.resultKey = key;
        this.post({ jsonrpc: "2.0", method: "ui/notifications/tool-result", params: this.pendingResult });
      }
    } else if (this.cancelReason !== undefined && !this.cancelSent) {
      this.cancelSent = true;
      this.post({ jsonrpc: "2.0", method: "ui/notifications/tool-cancelled", params: this.cancelReason ? { reason: this.cancelReason } : {} });
    }
  };

  View.prototype.pendingResultKey = function () {
    try {
      return JSON.stringify(this.pendingResult).length + ":" + (this.finishedAt || "");
    } catch (e) {
      return String(Date.now());
    }
  };

  /** Take what matters from a tool call payload (event or update). */
  View.prototype.absorb = function (call) {
    if (!call || call.id !== this.id) return;
    this.call = call;
    this.status = call.status;
    this.finishedAt = call.finishedAt;
    if (FINAL.indexOf(call.status) < 0) return;
    if ((call.status === "success" || call.status === "error") && call.result) {
      this.pendingResult = callToolResult(call.result);
    } else {
      // No result: rejected, expired, cancelled, or the server failed (unreachable,
      // crashed, timed out, refused the arguments) — the view is told it was cancelled.
      var fallback = call.status === "rejected" ? "The call was rejected." : call.status === "error" ? "The tool call failed." : "The call was cancelled.";
      this.cancelReason = (call.error && call.error.message) || fallback;
    }
  };

  View.prototype.onCall = function (call) {
    if (!call || call.id !== this.id || this.closed) return;
    var before = this.pendingResult;
    if (this.awaitingFinalInput && call.status !== "streaming" && call.status !== "cancelled" && call.arguments && typeof call.arguments === "object") {
      // The arguments are complete (the call was decided): tool-input follows the partials.
      this.awaitingFinalInput = false;
      this.toolInput = call.arguments;
    }
    if (FINAL.indexOf(call.status) >= 0 && !(before && this.finishedAt === call.finishedAt)) this.absorb(call);
    else {
      this.call = call;
      this.status = call.status;
    }
    // Apps SDK widget state set by another member (our own write is already known).
    if (this.appSdk && this.ready && call.widgetState !== undefined && !same(call.widgetState, this.widgetState)) {
      this.widgetState = call.widgetState;
      this.post({ jsonrpc: "2.0", method: "atrium/notifications/widget-state", params: { state: call.widgetState } });
    }
    this.sync();
  };

  View.prototype.onPartial = function (data) {
    if (!data || data.id !== this.id || this.inputSent || this.closed) return;
    if (!data.arguments || typeof data.arguments !== "object") return;
    this.awaitingFinalInput = true;
    this.partial = data.arguments;
    if (this.ready && this.protocol === "mcp") {
      this.partialSent = data.arguments;
      this.post({ jsonrpc: "2.0", method: "ui/notifications/tool-input-partial", params: { arguments: data.arguments } });
    }
  };

  // ---- permission requests -------------------------------------------------------------------

  function listWords(words) {
    if (words.length < 2) return words.join("");
    return words.slice(0, -1).join(", ") + " and " + words[words.length - 1];
  }

  /** The prompt for permissions the view's resource declares and its binding has not
   *  granted: owners answer it (Allow for this app / Not now), others see it waits. */
  View.prototype.permissionPrompt = function (asked) {
    if (!asked || !Array.isArray(asked.missing) || !asked.missing.length) return null;
    var key = "atrium:permission-later:" + this.id + ":" + asked.missing.join(",");
    try {
      if (window.sessionStorage.getItem(key)) return null;
    } catch (e) {
      /* storage may be unavailable */
    }
    var self = this;
    var labels = Array.isArray(asked.labels) && asked.labels.length ? asked.labels : asked.missing;
    var text = this.appName() + " asks to use " + listWords(labels.map(String));
    var box = h("div", { cls: "view-permission", attrs: { role: "group", "aria-label": "Permission request" } });
    box.appendChild(icon("shield"));
    if (!asked.canGrant) {
      box.appendChild(h("span", { cls: "view-permission-text" }, h("strong", { text: text }), h("span", { cls: "view-permission-note", text: " · waiting for a workspace owner to allow it" })));
      return box;
    }
    var status = h("span", { cls: "view-permission-note", attrs: { role: "status" } });
    var allow = h("button", { cls: "btn btn-primary btn-sm", text: "Allow for this app", attrs: { type: "button" } });
    var later = h("button", { cls: "btn btn-sm", text: "Not now", attrs: { type: "button" } });
    allow.addEventListener("click", function () {
      allow.disabled = true;
      later.disabled = true;
      status.textContent = "Allowing…";
      request(self.client, { type: "view.grant_permissions", toolCallId: self.id, permissions: asked.missing }).then(
        function () {
          self.remount("permissions changed");
        },
        function (err) {
          allow.disabled = false;
          later.disabled = false;
          status.textContent = (err && err.message) || "It could not be allowed.";
        }
      );
    });
    later.addEventListener("click", function () {
      try {
        window.sessionStorage.setItem(key, "1");
      } catch (e) {
        /* the prompt just goes away for now */
      }
      if (box.parentNode) box.parentNode.removeChild(box);
    });
    box.appendChild(h("span", { cls: "view-permission-text" }, h("strong", { text: text }), status));
    box.appendChild(h("span", { cls: "view-permission-actions" }, allow, later));
    return box;
  };

  /** Tear the frame down (the view is told first) and open it again: a new token, the new
   *  iframe `allow`, and the lifecycle replayed from where the call stands. */
  View.prototype.remount = function (reason) {
    var self = this;
    return this.teardown(reason).then(function () {
      clearTimeout(self.readyTimer);
      clearTimeout(self.sizeNotifyTimer);
      self.removeFrame();
      self.reset();
      self.cancelReason = undefined;
      self.pendingResult = null;
      self.phase = "idle";
      self.showLoading();
      self.open();
    });
  };

  // ---- size ----------------------------------------------------------------------------------------

  View.prototype.onSize = function (params) {
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
  };

  View.prototype.setHeight = function (px) {
    this.height = px;
    if (this.frame && this.mode === "inline") this.frame.style.height = px + "px";
  };

  View.prototype.watchSize = function () {
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
  };

  // ---- display modes ---------------------------------------------------------------------------------

  /** Modes this view may be put in: the app's declared list (if any) ∩ the host's. */
  View.prototype.allowedModes = function () {
    var declared = this.appCaps && Array.isArray(this.appCaps.availableDisplayModes) ? this.appCaps.availableDisplayModes : null;
    if (this.modal) return ["inline"];
    return MODES.filter(function (m) {
      return m === "inline" || !declared || !declared.length || declared.indexOf(m) >= 0;
    });
  };

  View.prototype.renderModeButtons = function () {
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
  };

  /** Host-initiated change (header buttons, Esc) or the outcome of an app request. */
  View.prototype.setMode = function (mode, source) {
    if (MODES.indexOf(mode) < 0 || mode === this.mode || !this.frame) return this.mode;
    if (mode !== "inline" && this.allowedModes().indexOf(mode) < 0) return this.mode;
    // One floating view per kind at a time.
    var self = this;
    views.forEach(function (v) {
      if (v !== self && v.mode === mode) v.setMode("inline", "host");
    });
    this.applyMode(mode);
    this.contextChanged();
    if (source === "user" && mode === "fullscreen") {
      var exit = this.stage && this.stage.querySelector(".view-exit");
      if (exit) exit.focus();
    }
    return this.mode;
  };

  View.prototype.applyMode = function (mode, silent) {
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
            { cls: "view-away" },
            h("span", { text: mode === "pip" ? "Shown in picture in picture." : "Shown full screen." }),
            h("button", { cls: "btn btn-sm", attrs: { type: "button" }, text: "Bring back here", on: { click: function () { self.setMode("inline", "user"); } } })
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
  };

  View.prototype.requestDisplayMode = function (id, params) {
    var self = this;
    var mode = params.mode;
    if (MODES.indexOf(mode) < 0) {
      this.respondError(id, { code: -32602, message: "Unknown display mode.", data: { reason: "invalid_display_mode" } });
      return;
    }
    var declared = this.appCaps && Array.isArray(this.appCaps.availableDisplayModes) ? this.appCaps.availableDisplayModes : undefined;
    var ask = Object.assign({}, params, { mode: mode, current: this.mode });
    if (declared) ask.availableDisplayModes = declared;
    this.forward("ui/request-display-mode", ask).then(
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

  // ---- links, downloads, modal -------------------------------------------------------------------

  View.prototype.openLink = function (id, params, legacyDone) {
    var self = this;
    var url = typeof params.url === "string" ? params.url.trim() : "";
    var done = legacyDone || {
      ok: function (r) {
        self.respond(id, r);
      },
      fail: function (e) {
        self.respondError(id, rpcError(e));
      },
    };
    this.forward("ui/open-link", Object.assign({}, params, { url: url })).then(
      function () {
        var scheme = (/^([a-z][a-z0-9+.-]*:)/i.exec(url) || [""])[0].toLowerCase();
        if (!scheme || BAD_SCHEMES.indexOf(scheme) >= 0) {
          // The server allowed it, the host still refuses browser-internal schemes.
          done.fail({ code: "scheme_not_allowed", message: "This link cannot be opened.", jsonrpcCode: -32003 });
          return;
        }
        if (scheme === "http:" || scheme === "https:") window.open(url, "_blank", "noopener,noreferrer");
        else {
          var a = h("a", { attrs: { href: url, target: "_blank", rel: "noopener noreferrer" } });
          a.click();
        }
        self.showNotice("Opened a link from " + self.appName() + ": ", url);
        done.ok({});
      },
      function (err) {
        done.fail(err);
      }
    );
  };

  View.prototype.showNotice = function (text, url) {
    if (!this.notice) return;
    var self = this;
    this.notice.textContent = "";
    this.notice.appendChild(document.createTextNode(text));
    if (url) {
      var a = h("a", { attrs: { href: url, target: "_blank", rel: "noopener noreferrer" }, text: url.length > 80 ? url.slice(0, 77) + "…" : url });
      this.notice.appendChild(a);
      this.notice.appendChild(icon("external"));
    }
    this.notice.hidden = false;
    clearTimeout(this.noticeTimer);
    this.noticeTimer = setTimeout(function () {
      if (self.notice) self.notice.hidden = true;
    }, 8000);
  };

  View.prototype.download = function (id, params) {
    var self = this;
    var items = [];
    (Array.isArray(params.contents) ? params.contents : []).forEach(function (item) {
      if (!item || item.type !== "resource" || !item.resource || typeof item.resource !== "object") return;
      var r = item.resource;
      // Never the app's type: a blob: URL lives on the app origin (see render.js toBlobUrl).
      var type = "application/octet-stream";
      var name = sanitizeFilename(r.uri);
      var blob = null;
      if (typeof r.text === "string") blob = new Blob([r.text], { type: type });
      else if (typeof r.blob === "string") {
        try {
          var bin = atob(r.blob);
          var bytes = new Uint8Array(bin.length);
          for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
          blob = new Blob([bytes], { type: type });
        } catch (e) {
          blob = null;
        }
      }
      if (blob) items.push({ name: name, blob: blob });
    });
    if (!items.length) {
      this.respondError(id, { code: -32602, message: "Nothing downloadable: send embedded resources with text or base64 blob.", data: { reason: "invalid_params" } });
      return;
    }
    this.forward("ui/download-file", params).then(
      function () {
        var names = items
          .map(function (i) {
            return i.name;
          })
          .join(", ");
        if (!window.confirm(self.appName() + " wants to download " + (items.length === 1 ? "a file" : items.length + " files") + ": " + names + "\n\nSave?")) {
          self.respondError(id, { code: -32000, message: "The user declined the download.", data: { reason: "user_declined" } });
          return;
        }
        items.forEach(function (item) {
          var url = URL.createObjectURL(item.blob);
          var a = h("a", { attrs: { href: url, download: item.name } });
          document.body.appendChild(a);
          a.click();
          a.remove();
          setTimeout(function () {
            URL.revokeObjectURL(url);
          }, 30000);
        });
        self.respond(id, {});
      },
      function (err) {
        self.respondError(id, rpcError(err));
      }
    );
  };

  /** Apps SDK requestModal: the same view, opened again in a host dialog — once the server
   *  allowed it (decided and audited like every view request). The host chrome names the app
   *  (its server's name); the app's own title is shown only as its text, never as ours. */
  View.prototype.openModal = function (id, params) {
    var self = this;
    if (this.modal) {
      this.respondError(id, { code: -32000, message: "A modal cannot open another modal.", data: { reason: "nested_modal" } });
      return;
    }
    this.forward("openai/requestModal", { title: typeof params.title === "string" ? params.title : "" }).then(
      function (allowed) {
        if (self.closed) return;
        self.showModal(id, params, allowed || {});
      },
      function (err) {
        self.respondError(id, rpcError(err));
      }
    );
  };

  View.prototype.showModal = function (id, params, allowed) {
    var self = this;
    if (this.modalView) this.modalView.dialog.close();
    var appName = typeof allowed.appName === "string" && allowed.appName ? allowed.appName : this.appName();
    var appTitle = typeof allowed.title === "string" ? allowed.title : "";
    var title = appName;
    var body = h("div", { cls: "view-modal-body", attrs: { "data-slot": "frame" } });
    var close = iconButton("close", "Close", function () {
      dialog.close();
    });
    var heading = h(
      "div",
      { cls: "view-modal-title" },
      h("strong", { cls: "view-modal-app", text: appName }),
      appTitle ? h("span", { cls: "view-modal-app-title", attrs: { title: "Text from " + appName }, text: appTitle }) : null
    );
    var dialog = h("dialog", { cls: "view-modal", attrs: { "aria-label": appName + (appTitle ? ": " + appTitle : "") } }, h("div", { cls: "view-modal-head" }, heading, h("span", { cls: "view-spacer" }), close), body);
    document.body.appendChild(dialog);
    var child = new View(dialog, this.call, this.client, { modal: { title: title, params: params.params, parent: this } });
    child.dialog = dialog;
    this.modalView = child;
    views.push(child);
    dialog.addEventListener("close", function () {
      if (self.modalView === child) self.modalView = null;
      child.destroy("modal closed").then(function () {
        if (dialog.parentNode) dialog.parentNode.removeChild(dialog);
      });
    });
    try {
      dialog.showModal();
    } catch (e) {
      dialog.setAttribute("open", "");
    }
    child.start();
    this.respond(id, {});
  };

  // ---- teardown -------------------------------------------------------------------------------------

  /** ui/resource-teardown, waiting at most 3 s for the view's answer. */
  View.prototype.teardown = function (reason) {
    var self = this;
    if (!this.frame || !this.ready || this.protocol !== "mcp") return Promise.resolve();
    return new Promise(function (resolve) {
      hostSeq += 1;
      var id = "atrium-host:" + hostSeq;
      var timer = setTimeout(function () {
        delete self.hostPending[id];
        resolve();
      }, TEARDOWN_WAIT_MS);
      self.hostPending[id] = function () {
        clearTimeout(timer);
        resolve();
      };
      self.post({ jsonrpc: "2.0", id: id, method: "ui/resource-teardown", params: { reason: reason || "unmount" } });
    });
  };

  View.prototype.destroy = function (reason) {
    var self = this;
    if (this.closed) return Promise.resolve();
    this.closed = true;
    if (this.observer) this.observer.unobserve(this.container);
    if (this.modalView) this.modalView.dialog.close();
    return this.teardown(reason).then(function () {
      clearTimeout(self.readyTimer);
      clearTimeout(self.sizeNotifyTimer);
      self.removeFrame();
      var i = views.indexOf(self);
      if (i >= 0) views.splice(i, 1);
    });
  };

  /** The app asked to be closed (request-teardown / Apps SDK requestClose). */
  View.prototype.honourTeardown = function () {
    var self = this;
    if (this.modal) {
      if (this.dialog && this.dialog.open) this.dialog.close();
      return;
    }
    if (this.closing) return;
    this.closing = true;
    this.teardown("closed by the app").then(function () {
      self.closing = false;
      self.removeFrame();
      self.phase = "closed";
      self.reset();
      self.slot.textContent = "";
      self.slot.appendChild(
        h(
          "div",
          { cls: "view-closed" },
          h("span", { text: self.appName() + " closed this view." }),
          h(
            "button",
            {
              cls: "btn btn-sm",
              attrs: { type: "button" },
              on: {
                click: function () {
                  self.phase = "idle";
                  self.showLoading();
                  self.open();
                },
              },
            },
            icon("reload"),
            "Reopen"
          )
        )
      );
    });
  };

  // ---- legacy MCP-UI (postMessage {type, messageId, payload}) ----------------------------------------

  View.prototype.legacyPost = function (type, messageId, payload) {
    var msg = { type: type, payload: payload || {} };
    if (messageId !== undefined) msg.messageId = messageId;
    this.post(msg);
  };

  View.prototype.renderData = function () {
    var base = this.legacy && this.legacy.initialRenderData && typeof this.legacy.initialRenderData === "object" ? this.legacy.initialRenderData : {};
    var result = this.pendingResult;
    var ctx = this.hostContext();
    return Object.assign({}, base, {
      toolInput: this.toolInput || {},
      toolOutput: result && result.structuredContent !== undefined ? result.structuredContent : null,
      theme: ctx.theme,
      locale: ctx.locale,
      displayMode: ctx.displayMode,
      maxHeight: ctx.containerDimensions.maxHeight || ctx.containerDimensions.height,
    });
  };

  View.prototype.sendRenderData = function () {
    this.legacyPost("ui-lifecycle-iframe-render-data", undefined, { renderData: this.renderData() });
  };

  View.prototype.onLegacy = function (msg) {
    var self = this;
    var type = msg.type;
    var messageId = typeof msg.messageId === "string" || typeof msg.messageId === "number" ? msg.messageId : undefined;
    var payload = msg.payload && typeof msg.payload === "object" ? msg.payload : {};
    var ack = function () {
      if (messageId !== undefined) self.legacyPost("ui-message-received", messageId, { messageId: messageId });
    };
    var done = {
      ok: function (response) {
        if (messageId !== undefined) self.legacyPost("ui-message-response", messageId, { messageId: messageId, response: response });
      },
      fail: function (err) {
        if (messageId !== undefined) self.legacyPost("ui-message-response", messageId, { messageId: messageId, error: { code: err.code, message: err.message } });
      },
    };
    var relay = function (method, params) {
      ack();
      self.forward(method, params).then(done.ok, done.fail);
    };
    switch (type) {
      case "ui-lifecycle-iframe-ready":
        this.protocol = this.protocol || "legacy";
        if (this.protocol === "legacy" && !this.ready) {
          this.resultKey = this.pendingResult ? this.pendingResultKey() : null;
          this.markReady();
          this.sendRenderData();
        }
        return;
      case "ui-request-render-data":
        this.protocol = this.protocol || "legacy";
        ack();
        this.sendRenderData();
        return;
      case "ui-size-change":
        this.onSize(payload);
        this.notifyServer("ui/notifications/size-changed", { height: payload.height, width: payload.width, _compat: "legacy" }, true);
        return;
      case "tool":
        relay("tools/call", { name: String(payload.toolName || ""), arguments: payload.params && typeof payload.params === "object" ? payload.params : {}, _compat: "legacy" });
        return;
      case "prompt":
        relay("ui/message", { role: "user", content: [{ type: "text", text: String(payload.prompt || "") }], _compat: "legacy" });
        return;
      case "intent":
        var text = "Intent: " + String(payload.intent || "");
        if (payload.params !== undefined) {
          try {
            text += " " + JSON.stringify(payload.params);
          } catch (e) {
            /* unserializable params are left out */
          }
        }
        relay("ui/message", { role: "user", content: [{ type: "text", text: text }], _compat: "legacy-intent" });
        return;
      case "notify":
        ack();
        if (this.allowLog()) this.notifyServer("notifications/message", { level: "info", logger: "mcp-ui", data: payload.message, _compat: "legacy" });
        done.ok({});
        return;
      case "link":
        ack();
        this.openLink(null, { url: payload.url, _compat: "legacy" }, done);
        return;
      case "ui-request-data":
        ack();
        done.fail({ code: "not_supported", message: "ui-request-data is not supported by this host." });
        return;
      default:
        return;
    }
  };

  // ---- global wiring -------------------------------------------------------------------------

  window.addEventListener("message", function (event) {
    var source = event.source;
    if (!source) return;
    for (var i = 0; i < views.length; i++) {
      var v = views[i];
      if (v.frame && source === v.frame.contentWindow) {
        if (event.origin !== v.origin) return;
        v.onMessage(event.data);
        return;
      }
    }
  });

  function forCall(id, fn) {
    views.slice().forEach(function (v) {
      if (v.id === id && !v.closed) fn(v);
    });
  }

  function subscribe(client) {
    if (!client || typeof client.on !== "function") return;
    if (subscribed) {
      if (subscribed.has(client)) return;
      subscribed.add(client);
    } else if (client.__atriumViews) return;
    else client.__atriumViews = true;
    client.on("toolcall", function (arg) {
      var call = dataOf(arg);
      if (call && call.id !== undefined) {
        forCall(call.id, function (v) {
          v.onCall(call);
        });
      }
    });
    client.on("toolcall.input-partial", function (arg) {
      var data = dataOf(arg);
      if (data && data.id !== undefined) {
        forCall(data.id, function (v) {
          v.onPartial(data);
        });
      }
    });
  }

  var themeTimer = null;
  var lastTheme = currentTheme();
  function themeChanged() {
    clearTimeout(themeTimer);
    themeTimer = setTimeout(function () {
      lastTheme = currentTheme();
      views.forEach(function (v) {
        v.contextChanged();
      });
    }, 30);
  }
  document.addEventListener("atrium:themechange", themeChanged);
  if (typeof MutationObserver === "function") {
    new MutationObserver(function () {
      if (currentTheme() !== lastTheme) themeChanged();
    }).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
  }

  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    for (var i = 0; i < views.length; i++) {
      if (views[i].mode === "fullscreen") {
        views[i].setMode("inline", "user");
        event.preventDefault();
        return;
      }
    }
  });

  // Rows the chat removed: tear their views down (checked lazily, not per mutation).
  var sweepTimer = null;
  function sweep() {
    sweepTimer = null;
    views.slice().forEach(function (v) {
      if (!v.modal && !v.container.isConnected) v.destroy("removed");
    });
  }
  if (typeof MutationObserver === "function") {
    var startSweeping = function () {
      new MutationObserver(function () {
        if (!sweepTimer) sweepTimer = setTimeout(sweep, 1000);
      }).observe(document.body, { childList: true, subtree: true });
    };
    if (document.body) startSweeping();
    else document.addEventListener("DOMContentLoaded", startSweeping);
  }

  window.addEventListener("pagehide", function () {
    views.forEach(function (v) {
      if (v.ready && v.protocol === "mcp") v.post({ jsonrpc: "2.0", id: "atrium-host:pagehide", method: "ui/resource-teardown", params: { reason: "page closed" } });
    });
  });

  // ---- public API -------------------------------------------------------------------------------

  function mount(container, call, client) {
    if (!container || !call || call.id === undefined) throw new Error("AtriumViews.mount needs a container and a tool call.");
    client = client || window.AtriumClient;
    if (!client || typeof client.send !== "function") throw new Error("AtriumViews.mount needs the thread client.");
    if (call.parentView !== undefined && call.parentView !== null) {
      // A call a view made for itself: its result goes back to that view (tools/call),
      // it does not open a second view of its own.
      container.hidden = true;
      container.classList.add("view-child-call");
      return null;
    }
    var existing = viewForContainer(container);
    if (existing && existing.id === call.id) {
      existing.onCall(call);
      return existing;
    }
    if (existing) existing.destroy("replaced");
    subscribe(client);
    var view = new View(container, call, client);
    views.push(view);
    view.start();
    return view;
  }

  function update(container, call, client) {
    if (call && call.parentView !== undefined && call.parentView !== null) return mount(container, call, client);
    var view = viewForContainer(container);
    if (!view) return mount(container, call, client);
    view.onCall(call);
    return view;
  }

  function unmount(container) {
    var view = viewForContainer(container);
    return view ? view.destroy("unmount") : Promise.resolve();
  }

  window.AtriumViews = {
    mount: mount,
    update: update,
    unmount: unmount,
    /** For tests and debugging: a read-only summary of the live views. */
    list: function () {
      return views.map(function (v) {
        return { toolCallId: v.id, phase: v.phase, ready: v.ready, protocol: v.protocol, mode: v.mode, height: v.height, flavor: v.flavor, modal: !!v.modal };
      });
    },
    setDisplayMode: function (toolCallId, mode) {
      var result = null;
      forCall(toolCallId, function (v) {
        if (!v.modal) result = v.setMode(mode, "user");
      });
      return result;
    },
  };
})();
