/*
 * Atrium rendering: presenter payloads (chat/presenters.py) → DOM.
 *
 * Shared by the reload path (the thread page's embedded snapshot) and the live path (websocket
 * events), so a thread looks the same either way. Everything is built with
 * createElement/textContent; the ONLY innerHTML is a message's server-rendered, sanitized
 * Markdown (`message.html`).
 *
 * Public API: window.AtriumRender (see the bottom of this file).
 */
(function () {
  "use strict";

  var SVG_NS = "http://www.w3.org/2000/svg";

  // ---- tiny DOM helpers ----------------------------------------------------------------

  /**
   * h("div", {class: "x", text: "hi", data: {id: 1}, attrs: {title: "t"}}, child, "text")
   * Strings become text nodes. Never sets innerHTML or a style attribute.
   */
  function h(tag, props) {
    var el = document.createElement(tag);
    if (props) {
      if (props["class"]) el.className = props["class"];
      if (props.text !== undefined && props.text !== null) el.textContent = String(props.text);
      if (props.data) {
        for (var k in props.data) {
          if (props.data[k] !== undefined && props.data[k] !== null) el.dataset[k] = String(props.data[k]);
        }
      }
      if (props.attrs) {
        for (var a in props.attrs) {
          var v = props.attrs[a];
          if (v === undefined || v === null || v === false || a === "style") continue;
          el.setAttribute(a, v === true ? "" : String(v));
        }
      }
    }
    for (var i = 2; i < arguments.length; i++) append(el, arguments[i]);
    return el;
  }

  function append(parent, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) {
      child.forEach(function (c) {
        append(parent, c);
      });
      return;
    }
    parent.appendChild(typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : child);
  }

  // Stroke icons (24×24), drawn with currentColor.
  var ICONS = {
    wrench: [["path", "M14.7 6.3a1 1 0 0 0 0 1.4l1.6 1.6a1 1 0 0 0 1.4 0l3.77-3.77a6 6 0 0 1-7.94 7.94l-6.91 6.91a2.12 2.12 0 0 1-3-3l6.91-6.91a6 6 0 0 1 7.94-7.94l-3.76 3.76z"]],
    check: [["path", "m5 12 5 5 9-10"]],
    x: [["path", "M18 6 6 18M6 6l12 12"]],
    alert: [["path", "M10.3 3.9 1.8 18a2 2 0 0 0 1.7 3h17a2 2 0 0 0 1.7-3L13.7 3.9a2 2 0 0 0-3.4 0zM12 9v4M12 17h.01"]],
    info: [["circle", 12, 12, 9], ["path", "M12 16v-4M12 8h.01"]],
    clock: [["circle", 12, 12, 9], ["path", "M12 7v5l3 2"]],
    shield: [["path", "M12 22s8-4 8-10V5l-8-3-8 3v7c0 6 8 10 8 10z"]],
    ban: [["circle", 12, 12, 9], ["path", "m5.6 5.6 12.8 12.8"]],
    image: [["rect", 3, 3, 18, 18, 2], ["circle", 9, 9, 2], ["path", "m21 15-5-5L5 21"]],
    file: [["path", "M14 2H6a2 2 0 0 0-2 2v16a2 2 0 0 0 2 2h12a2 2 0 0 0 2-2V8zM14 2v6h6"]],
    music: [["path", "M9 18V5l12-2v13"], ["circle", 6, 18, 3], ["circle", 18, 16, 3]],
    video: [["path", "m22 8-6 4 6 4z"], ["rect", 2, 6, 14, 12, 2]],
    download: [["path", "M21 15v4a2 2 0 0 1-2 2H5a2 2 0 0 1-2-2v-4M7 10l5 5 5-5M12 15V3"]],
    link: [["path", "M10 13a5 5 0 0 0 7.54.54l3-3a5 5 0 0 0-7.07-7.07l-1.72 1.71M14 11a5 5 0 0 0-7.54-.54l-3 3a5 5 0 0 0 7.07 7.07l1.71-1.71"]],
    external: [["path", "M15 3h6v6M10 14 21 3M18 13v6a2 2 0 0 1-2 2H5a2 2 0 0 1-2-2V8a2 2 0 0 1 2-2h6"]],
    sparkle: [["path", "M12 3l1.8 5.2L19 10l-5.2 1.8L12 17l-1.8-5.2L5 10l5.2-1.8zM19 15l.8 2.2L22 18l-2.2.8L19 21l-.8-2.2L16 18l2.2-.8z"]],
    app: [["rect", 3, 3, 7, 7, 1.5], ["rect", 14, 3, 7, 7, 1.5], ["rect", 3, 14, 7, 7, 1.5], ["rect", 14, 14, 7, 7, 1.5]],
    layout: [["rect", 3, 4, 18, 16, 2], ["path", "M3 9h18"]],
    code: [["path", "m16 18 6-6-6-6M8 6l-6 6 6 6"]],
    user: [["circle", 12, 8, 4], ["path", "M20 21a8 8 0 0 0-16 0"]],
    cpu: [["rect", 5, 5, 14, 14, 2], ["path", "M9 1v4M15 1v4M9 19v4M15 19v4M1 9h4M1 15h4M19 9h4M19 15h4"]],
    chevron: [["path", "m9 6 6 6-6 6"]],
    expand: [["path", "M15 3h6v6M9 21H3v-6M21 3l-7 7M3 21l7-7"]],
    stop: [["rect", 6, 6, 12, 12, 2]],
    hourglass: [["path", "M6 2h12M6 22h12M7 2c0 5 10 5 10 10S7 17 7 22M17 2c0 5-10 5-10 10s10 5 10 10"]],
  };

  function icon(name, cls) {
    var svg = document.createElementNS(SVG_NS, "svg");
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("aria-hidden", "true");
    svg.setAttribute("focusable", "false");
    svg.setAttribute("class", "icon" + (cls ? " " + cls : ""));
    (ICONS[name] || ICONS.info).forEach(function (spec) {
      var el = document.createElementNS(SVG_NS, spec[0]);
      if (spec[0] === "path") el.setAttribute("d", spec[1]);
      else if (spec[0] === "circle") {
        el.setAttribute("cx", spec[1]);
        el.setAttribute("cy", spec[2]);
        el.setAttribute("r", spec[3]);
      } else if (spec[0] === "rect") {
        el.setAttribute("x", spec[1]);
        el.setAttribute("y", spec[2]);
        el.setAttribute("width", spec[3]);
        el.setAttribute("height", spec[4]);
        el.setAttribute("rx", spec[5]);
      }
      svg.appendChild(el);
    });
    return svg;
  }

  // ---- formatting ----------------------------------------------------------------------

  var timeFmt = new Intl.DateTimeFormat(undefined, { hour: "numeric", minute: "2-digit" });
  var fullFmt = new Intl.DateTimeFormat(undefined, { dateStyle: "full", timeStyle: "short" });
  var dayFmt = new Intl.DateTimeFormat(undefined, { weekday: "long", month: "long", day: "numeric" });
  var dayYearFmt = new Intl.DateTimeFormat(undefined, { month: "long", day: "numeric", year: "numeric" });
  var rtf = typeof Intl.RelativeTimeFormat === "function" ? new Intl.RelativeTimeFormat(undefined, { numeric: "auto" }) : null;

  function toDate(iso) {
    var d = iso instanceof Date ? iso : new Date(iso);
    return isNaN(d.getTime()) ? null : d;
  }
  function formatTime(iso) {
    var d = toDate(iso);
    return d ? timeFmt.format(d) : "";
  }
  function formatFull(iso) {
    var d = toDate(iso);
    return d ? fullFmt.format(d) : "";
  }
  function dayKey(iso) {
    var d = toDate(iso);
    return d ? d.getFullYear() + "-" + d.getMonth() + "-" + d.getDate() : "";
  }
  function formatDay(iso) {
    var d = toDate(iso);
    if (!d) return "";
    var today = new Date();
    var yesterday = new Date(today.getFullYear(), today.getMonth(), today.getDate() - 1);
    if (dayKey(d) === dayKey(today)) return "Today";
    if (dayKey(d) === dayKey(yesterday)) return "Yesterday";
    return (d.getFullYear() === today.getFullYear() ? dayFmt : dayYearFmt).format(d);
  }
  function formatRelative(iso) {
    var d = toDate(iso);
    if (!d) return "";
    var seconds = Math.round((d.getTime() - Date.now()) / 1000);
    var abs = Math.abs(seconds);
    var units = [
      ["day", 86400],
      ["hour", 3600],
      ["minute", 60],
      ["second", 1],
    ];
    for (var i = 0; i < units.length; i++) {
      if (abs >= units[i][1] || units[i][0] === "second") {
        var value = Math.round(seconds / units[i][1]);
        return rtf ? rtf.format(value, units[i][0]) : value + " " + units[i][0] + "s";
      }
    }
    return "";
  }
  function formatBytes(n) {
    if (typeof n !== "number" || !isFinite(n) || n < 0) return "";
    if (n < 1024) return n + " B";
    var units = ["KB", "MB", "GB", "TB"];
    var value = n;
    var i = -1;
    do {
      value /= 1024;
      i++;
    } while (value >= 1024 && i < units.length - 1);
    return (value >= 10 ? Math.round(value) : value.toFixed(1)) + " " + units[i];
  }
  function formatLatency(ms) {
    if (typeof ms !== "number" || !isFinite(ms)) return "";
    if (ms < 1) return "<1 ms";
    if (ms < 1000) return Math.round(ms) + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 1 : 0) + " s";
    return Math.floor(ms / 60000) + " min " + Math.round((ms % 60000) / 1000) + " s";
  }
  function formatDuration(seconds) {
    if (typeof seconds !== "number" || !isFinite(seconds)) return "";
    var m = Math.floor(seconds / 60);
    var s = Math.round(seconds % 60);
    return m + ":" + (s < 10 ? "0" : "") + s;
  }
  function initials(name) {
    var words = String(name || "?")
      .trim()
      .split(/[\s._-]+/)
      .filter(Boolean);
    if (!words.length) return "?";
    var first = Array.from(words[0])[0] || "?";
    var second = words.length > 1 ? Array.from(words[words.length - 1])[0] || "" : "";
    return (first + second).toUpperCase();
  }
  function strHash(s) {
    var n = 5381;
    for (var i = 0; i < s.length; i++) n = ((n * 33) ^ s.charCodeAt(i)) >>> 0;
    return n.toString(36) + "-" + s.length;
  }
  function hueClass(key) {
    var n;
    if (typeof key === "number") n = key;
    else {
      n = 0;
      var s = String(key || "");
      for (var i = 0; i < s.length; i++) n = (n * 31 + s.charCodeAt(i)) >>> 0;
    }
    return "hue-" + (Math.abs(n) % 10);
  }

  // ---- JSON ----------------------------------------------------------------------------

  var JSON_TOKEN = /("(?:\\u[a-fA-F0-9]{4}|\\[^u]|[^\\"])*"(\s*:)?|\b(?:true|false|null)\b|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/g;

  /** Pretty, syntax-highlighted JSON in a <pre>. */
  /* The "Allowed in this thread" panel: what runs here without asking, who allowed it,
   * and (for those who may) Revoke. opts.canAct, opts.isOwner. Empty list: nothing. */
  function renderAllowances(allowances, opts) {
    var list = allowances || [];
    var panel = h("details", { class: "allowances", attrs: { "aria-label": "Allowed in this thread" } });
    panel.hidden = !list.length;
    panel.appendChild(
      h("summary", { class: "allowances-summary" },
        icon("shield"),
        h("span", { class: "allowances-title", text: "Allowed in this thread" }),
        h("span", { class: "allowances-count", text: String(list.length) }),
        h("span", { class: "allowances-hint", text: list.map(function (a) { return a.tool; }).join(", ") }),
        icon("chevron", "allowances-chevron"))
    );
    var body = h("ul", { class: "allowances-list" });
    list.forEach(function (a) {
      var who = (a.grantedBy && a.grantedBy.name) || "someone";
      var mayRevoke = opts.canAct && (a.scope === "thread" || opts.isOwner);
      body.appendChild(
        h("li", { class: "allowance", data: { allowanceId: a.id } },
          h("div", { class: "allowance-main" },
            h("code", { class: "allowance-tool", text: a.tool }),
            h("span", { class: "allowance-app", text: (a.server && a.server.name) || "" }),
            h("span", { class: "scope-badge scope-" + a.scope, text: a.scope === "thread" ? "This thread" : "Whole workspace" })),
          h("span", { class: "allowance-meta", attrs: { title: formatFull(a.createdAt) }, text: "Allowed by " + who + " · " + formatRelative(a.createdAt) }),
          mayRevoke
            ? h("button", { class: "btn btn-ghost btn-sm allowance-revoke", text: "Revoke", attrs: { type: "button", "aria-label": "Revoke " + a.tool }, data: { action: "revoke-allowance", allowanceId: a.id } })
            : null)
      );
    });
    panel.appendChild(body);
    return panel;
  }

  function renderJson(value, cls) {
    var text;
    try {
      text = JSON.stringify(value, null, 2);
    } catch (e) {
      text = String(value);
    }
    if (text === undefined) text = "undefined";
    var code = h("code");
    var last = 0;
    var match;
    JSON_TOKEN.lastIndex = 0;
    while ((match = JSON_TOKEN.exec(text))) {
      if (match.index > last) code.appendChild(document.createTextNode(text.slice(last, match.index)));
      var token = match[0];
      var kind = "num";
      if (token.charAt(0) === '"') kind = match[2] ? "key" : "str";
      else if (token === "true" || token === "false") kind = "bool";
      else if (token === "null") kind = "null";
      code.appendChild(h("span", { class: "j-" + kind, text: token }));
      last = match.index + token.length;
    }
    if (last < text.length) code.appendChild(document.createTextNode(text.slice(last)));
    return h("pre", { class: "code-block json" + (cls ? " " + cls : "") }, code);
  }

  // ---- URLs ----------------------------------------------------------------------------

  function schemeOf(url) {
    var m = /^([a-zA-Z][a-zA-Z0-9+.-]*):/.exec(String(url || "").trim());
    return m ? m[1].toLowerCase() : "";
  }
  /** Media sources we load: same-origin paths, http(s), blob:, and data: of the given kind. */
  function safeMediaSrc(src, kind) {
    if (typeof src !== "string" || !src) return null;
    var scheme = schemeOf(src);
    if (!scheme) return /^\/(?!\/)/.test(src) ? src : null;
    if (scheme === "http" || scheme === "https" || scheme === "blob") return src;
    if (scheme === "data") {
      var mime = src.slice(5).split(/[;,]/)[0].toLowerCase();
      if (kind === "binary" || mime.indexOf(kind + "/") === 0) return src;
    }
    return null;
  }
  function safeLinkHref(uri) {
    var scheme = schemeOf(uri);
    return scheme === "http" || scheme === "https" || scheme === "mailto" ? uri : null;
  }

  // The host page's CSP allows media from 'self' and blob: only, so inline audio/video/file
  // payloads (data: URIs) are turned into blob: URLs, once per distinct source.
  var blobCache = new Map();
  // A blob: URL belongs to the app origin: one typed text/html (or SVG, XML...) would run
  // the app's content there if opened. Only audio/video keep their type (the players need
  // it); everything else is an opaque application/octet-stream.
  function toBlobUrl(src, kind) {
    if (schemeOf(src) !== "data") return src;
    var cacheKey = (kind || "") + "|" + src;
    if (blobCache.has(cacheKey)) return blobCache.get(cacheKey);
    var url = src;
    try {
      var comma = src.indexOf(",");
      var header = src.slice(5, comma);
      var body = src.slice(comma + 1);
      var declared = (header.split(";")[0] || "").toLowerCase();
      var playable = (kind === "audio" || kind === "video") && declared.indexOf(kind + "/") === 0;
      var mime = playable ? declared : "application/octet-stream";
      var bytes;
      if (/;base64$/i.test(header)) {
        var bin = atob(body);
        bytes = new Uint8Array(bin.length);
        for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      } else {
        bytes = new TextEncoder().encode(decodeURIComponent(body));
      }
      url = URL.createObjectURL(new Blob([bytes], { type: mime }));
    } catch (e) {
      url = null;
    }
    blobCache.set(cacheKey, url);
    return url;
  }

  // ---- messages ------------------------------------------------------------------------

  function authorName(msg) {
    if (msg.author && msg.author.name) return msg.author.name;
    if (msg.authorLabel) return msg.authorLabel;
    return { assistant: "Assistant", tool: "Tool", system: "System", user: "Someone" }[msg.role] || "Someone";
  }

  function authorKey(msg) {
    if (msg.author && msg.author.id !== undefined) return "u:" + msg.author.id;
    return "l:" + msg.role + ":" + (msg.authorLabel || "") + ":" + (msg.viaToolCall || "");
  }

  function renderAvatar(msg, small) {
    var cls = "avatar" + (small ? " avatar-sm" : "");
    if (msg.author) {
      return h("span", { class: cls + " " + hueClass(msg.author.id), attrs: { "aria-hidden": "true" }, text: initials(msg.author.name) });
    }
    if (msg.viaToolCall) return h("span", { class: cls + " avatar-app", attrs: { "aria-hidden": "true" } }, icon("app"));
    if (msg.role === "assistant" && (msg.authorLabel || "") !== "Atrium") {
      return h("span", { class: cls + " avatar-assistant", attrs: { "aria-hidden": "true" } }, icon("sparkle"));
    }
    if (msg.role === "assistant" || msg.role === "system") {
      return h("span", { class: cls + " avatar-system", attrs: { "aria-hidden": "true" } }, logoMark());
    }
    return h("span", { class: cls + " avatar-system", attrs: { "aria-hidden": "true" } }, icon("wrench"));
  }

  function logoMark() {
    var svg = document.createElementNS(SVG_NS, "svg");
    svg.setAttribute("viewBox", "0 0 32 32");
    svg.setAttribute("class", "logo-inline");
    svg.setAttribute("aria-hidden", "true");
    var path = document.createElementNS(SVG_NS, "path");
    path.setAttribute("d", "M9 23 16 8l7 15M11.8 17.5h8.4");
    svg.appendChild(path);
    return svg;
  }

  function renderMessageBody(msg) {
    if (msg.status === "streaming" || (!msg.html && msg.text && msg.status !== "complete")) {
      return h(
        "div",
        { class: "msg-body is-streaming" },
        h("span", { class: "stream-text", text: msg.text || "" }),
        h("span", { class: "caret", attrs: { "aria-hidden": "true" } })
      );
    }
    var body = h("div", { class: "msg-body md" });
    if (msg.html) {
      // The one trusted field: Markdown rendered and sanitized by the server (chat/markdown.py).
      body.innerHTML = msg.html;
    } else {
      body.textContent = msg.text || "";
    }
    if (msg.status === "error") {
      body.appendChild(h("p", { class: "msg-error" }, icon("alert"), "This message could not be completed."));
    }
    return body;
  }

  /**
   * A message → a timeline entry (<article class="entry msg-entry">) with empty
   * `.msg-tools` (tool call cards) and `.msg-views` (view rows) slots for the caller.
   * opts.appName(toolCallId) → the app name for "via <app>" tags.
   */
  function renderMessage(msg, opts) {
    opts = opts || {};
    var name = authorName(msg);
    var time = h("time", { class: "msg-time", text: formatTime(msg.createdAt), attrs: { datetime: msg.createdAt, title: formatFull(msg.createdAt) } });
    var header = h("div", { class: "msg-header" }, h("span", { class: "msg-author", text: name }));
    if (!msg.author && msg.role !== "user") {
      header.appendChild(h("span", { class: "tag tag-bot", text: msg.viaToolCall ? "App" : msg.role === "assistant" && name !== "Atrium" ? "AI" : "Bot" }));
    }
    if (msg.viaToolCall) {
      var appName = (opts.appName && opts.appName(msg.viaToolCall)) || "an app";
      header.appendChild(h("span", { class: "via-tag", attrs: { title: "Posted by an app view" } }, icon("app"), "via " + appName));
    }
    header.appendChild(time);
    if (msg.role === "assistant" && msg.status === "streaming" && opts.canAct) {
      header.appendChild(h("button", { class: "btn btn-ghost btn-xs msg-stop", attrs: { type: "button", title: "Stop the assistant's answer" }, data: { action: "cancel-turn" } }, icon("stop"), "Stop"));
    }

    var entry = h(
      "article",
      {
        class: "entry msg-entry role-" + (msg.role || "user") + (msg.status === "streaming" ? " is-streaming" : ""),
        data: { messageId: msg.id, authorKey: authorKey(msg), time: toDate(msg.createdAt) ? toDate(msg.createdAt).getTime() : 0, day: dayKey(msg.createdAt) },
        attrs: { "aria-label": name + ", " + formatTime(msg.createdAt) },
      },
      h("div", { class: "day-divider", attrs: { role: "separator" } }, h("span", { text: formatDay(msg.createdAt) })),
      h(
        "div",
        { class: "msg" },
        h("div", { class: "msg-gutter" }, renderAvatar(msg), h("time", { class: "msg-gutter-time", text: formatTime(msg.createdAt), attrs: { datetime: msg.createdAt, "aria-hidden": "true" } })),
        h("div", { class: "msg-content" }, header, renderMessageBody(msg), h("div", { class: "msg-tools" }))
      ),
      h("div", { class: "msg-views" })
    );
    return entry;
  }

  /** Update a streaming message's text in place (message.delta). */
  function updateStreamingText(entry, text) {
    var node = entry && entry.querySelector(".stream-text");
    if (node) node.textContent = text;
    return !!node;
  }

  // ---- tool calls ----------------------------------------------------------------------

  var STATUS = {
    running: { label: "Running", cls: "running" },
    streaming: { label: "Receiving input", cls: "running" },
    success: { label: "Done", cls: "success", icon: "check" },
    error: { label: "Failed", cls: "error", icon: "x" },
    awaiting_approval: { label: "Awaiting approval", cls: "awaiting", icon: "shield" },
    rejected: { label: "Rejected", cls: "rejected", icon: "ban" },
    cancelled: { label: "Cancelled", cls: "cancelled", icon: "ban" },
  };

  var ORIGINS = {
    model: { label: "Model", icon: "sparkle" },
    user: { label: "User", icon: "user" },
    app_view: { label: "App view", icon: "app" },
  };

  var ERROR_TITLES = {
    timeout: "The tool took too long to answer",
    tool_timeout: "The tool took too long to answer",
    cancelled: "The call was cancelled",
    server_unavailable: "The server is unavailable",
    server_error: "The server reported an error",
    connection_failed: "Couldn't connect to the server",
    connection_error: "Couldn't connect to the server",
    unknown_tool: "This tool doesn't exist (any more)",
    tool_not_found: "This tool doesn't exist (any more)",
    invalid_arguments: "The arguments don't match what the tool expects",
    invalid_params: "The arguments don't match what the tool expects",
    forbidden: "Not allowed",
    denied: "Blocked by policy",
    policy_denied: "Blocked by policy",
    rejected: "The call was rejected",
    approval_rejected: "The call was rejected",
    expired: "The approval request expired",
    approval_expired: "The approval request expired",
    server_not_found: "There is no such server",
    internal_error: "Something went wrong on our side",
  };

  function isToolError(call) {
    return !!(call.result && call.result.meta && call.result.meta.isError);
  }

  function renderStatusPill(call) {
    var st = STATUS[call.status] || { label: String(call.status || "Unknown"), cls: "unknown" };
    var label = st.label;
    var cls = st.cls;
    if (call.status === "success" && isToolError(call)) {
      label = "Tool error";
      cls = "error";
    }
    var pill = h("span", { class: "status-pill status-" + cls, data: { status: call.status } });
    if (call.status === "running") pill.appendChild(h("span", { class: "spinner spinner-xs", attrs: { "aria-hidden": "true" } }));
    else if (st.icon) pill.appendChild(icon(cls === "error" ? "x" : st.icon));
    pill.appendChild(document.createTextNode(label));
    return pill;
  }

  function renderProgress(progress) {
    progress = progress || {};
    var total = typeof progress.total === "number" && progress.total > 0 ? progress.total : null;
    var value = typeof progress.progress === "number" ? progress.progress : null;
    var pct = total !== null && value !== null ? Math.max(0, Math.min(1, value / total)) : null;
    var bar = h("div", { class: "progress-bar" });
    var track = h("div", {
      class: "progress-track" + (pct === null ? " is-indeterminate" : ""),
      attrs: {
        role: "progressbar",
        "aria-valuemin": pct === null ? null : "0",
        "aria-valuemax": pct === null ? null : "100",
        "aria-valuenow": pct === null ? null : String(Math.round(pct * 100)),
        "aria-label": "Progress",
      },
    }, bar);
    if (pct !== null) bar.style.width = (pct * 100).toFixed(1) + "%";
    var label = [];
    if (progress.message) label.push(String(progress.message));
    if (pct !== null) label.push(value + " / " + total);
    else if (value !== null) label.push(String(value));
    return h("div", { class: "tc-progress" }, track, label.length ? h("span", { class: "progress-label", text: label.join(" · ") }) : null);
  }

  function requesterText(call) {
    var approval = call.approval || {};
    var kind = approval.requestedByKind || call.origin;
    if (kind === "model") return "the model";
    if (kind === "app_view") return "the " + ((call.server && call.server.name) || "app") + " view";
    if (call.requestedBy && call.requestedBy.name) return call.requestedBy.name;
    return "a member";
  }

  var RISK_LABELS = { read: "Read", write: "Write", destructive: "Destructive" };

  function renderApproval(call, opts) {
    var approval = call.approval;
    var box = h("div", { class: "approval approval-" + approval.status, attrs: { role: "group", "aria-label": "Approval request" }, data: { approvalId: approval.id } });
    var head = h(
      "div",
      { class: "approval-head" },
      icon(approval.status === "pending" ? "shield" : approval.status === "approved" ? "check" : "ban"),
      h("strong", { text: approval.status === "pending" ? "Approval needed" : approval.status === "approved" ? "Approved" : approval.status === "expired" ? "Approval expired" : "Rejected" }),
      approval.risk ? h("span", { class: "risk-badge risk-" + approval.risk, text: RISK_LABELS[approval.risk] || approval.risk }) : null
    );
    box.appendChild(head);
    var meta = ["Requested by " + requesterText(call)];
    if (approval.status === "pending" && approval.expiresAt) meta.push("expires " + formatRelative(approval.expiresAt));
    if (approval.status !== "pending" && approval.decidedBy) {
      meta.push((approval.status === "approved" ? "approved" : "rejected") + " by " + approval.decidedBy.name + (approval.decidedAt ? " " + formatRelative(approval.decidedAt) : ""));
    }
    box.appendChild(h("p", { class: "approval-meta", text: meta.join(" · ") }));
    if (approval.reason) box.appendChild(h("p", { class: "approval-reason", text: approval.reason }));
    if (approval.status !== "pending") return box;

    box.appendChild(h("p", { class: "approval-args-label", text: "It will run with exactly these arguments:" }));
    box.appendChild(renderJson(call.arguments || {}, "approval-args"));
    if (opts.canAct) {
      // Consent at the right scope: once, in this thread, or (owners) in the workspace.
      var offers = approval.offers || [];
      var appName = (call.server && call.server.name) || "this app";
      var ids = { approvalId: approval.id, toolCallId: call.id };
      var actions = h("div", { class: "approval-actions" });
      actions.appendChild(h("button", { class: "btn btn-primary btn-sm", text: "Approve once", attrs: { type: "button" }, data: Object.assign({ action: "approve" }, ids) }));
      if (offers.indexOf("thread") !== -1) {
        actions.appendChild(
          h("button", { class: "btn btn-secondary btn-sm", attrs: { type: "button", title: "Calls of " + call.tool + " in this thread run without asking until someone revokes it" }, data: Object.assign({ action: "allow_thread" }, ids) },
            "Allow ", h("code", { text: call.tool }), " in this thread")
        );
      }
      if (opts.isOwner && offers.indexOf("workspace") !== -1) {
        actions.appendChild(
          h("button", { class: "btn btn-secondary btn-sm", attrs: { type: "button", title: "Calls of " + call.tool + " run without asking in every thread of this workspace until someone revokes it" }, data: Object.assign({ action: "allow_workspace" }, ids) },
            "Always allow ", h("code", { text: call.tool }), " for " + appName + " in this workspace")
        );
      }
      actions.appendChild(h("button", { class: "btn btn-danger-soft btn-sm", text: "Reject", attrs: { type: "button" }, data: Object.assign({ action: "reject" }, ids) }));
      box.appendChild(actions);
      if (!offers.length) {
        box.appendChild(h("p", { class: "approval-note" }, icon("info"), "Every call of this tool needs its own approval."));
      }
    } else {
      box.appendChild(h("p", { class: "approval-readonly" }, icon("info"), "Only owners and members can approve or reject this call."));
    }
    return box;
  }

  function renderToolError(error) {
    error = error || {};
    var title = ERROR_TITLES[error.code] || "The tool call failed";
    var message = error.message && error.message !== title ? error.message : "";
    // A cancellation was someone's choice, not a failure: a quiet note, not an alarm.
    var cancelled = error.code === "cancelled";
    return h(
      "div",
      { class: "callout " + (cancelled ? "callout-muted" : "callout-error"), attrs: { role: cancelled ? "note" : "alert" } },
      icon(cancelled ? "ban" : "alert"),
      h("div", { class: "callout-body" }, h("p", { class: "callout-title", text: title }), message ? h("p", { class: "callout-text", text: message }) : null, error.code ? h("code", { class: "callout-code", text: error.code }) : null)
    );
  }

  /** "Connect <server> to continue": the server needs a sign-in (OAuth) that the person
   *  the call ran for (or, for a shared grant, an administrator) has not given. The button
   *  posts to the app's connect view in a new tab (the provider's consent page); once
   *  connected, "Run again" repeats the call as the viewer. */
  function renderConnectCard(call, opts) {
    var details = (call.error && call.error.details) || {};
    var server = (call.server && (call.server.name || call.server.slug)) || details.server || "the server";
    var slug = (call.server && call.server.slug) || details.slug || "";
    var mine = !details.shared && (!call.requestedBy || String(call.requestedBy.id) === String(opts.userId));
    var tokenInput = document.querySelector('input[name="csrfmiddlewaretoken"]');
    var text;
    if (details.shared) text = "An administrator needs to connect " + server + " for everyone before this tool can run.";
    else if (mine) text = "This tool runs with your own " + server + " account. Connect it, then run the call again.";
    else text = "This tool runs with the account of " + ((call.requestedBy && call.requestedBy.name) || "the person who asked") + ", who has not connected " + server + " yet.";
    var actions = null;
    if (mine && opts.canAct && slug && tokenInput) {
      actions = h(
        "div",
        { class: "connect-actions" },
        h(
          "form",
          { class: "connect-form", attrs: { method: "post", action: "/oauth/connect/" + encodeURIComponent(slug) + "/", target: "_blank" } },
          h("input", { attrs: { type: "hidden", name: "csrfmiddlewaretoken", value: tokenInput.value } }),
          h("button", { class: "btn btn-primary btn-sm", attrs: { type: "submit" } }, icon("shield"), "Connect " + server)
        ),
        call.origin !== "app_view" ? h("button", { class: "btn btn-ghost btn-sm", text: "Run again", attrs: { type: "button" }, data: { action: "retry-tool", toolCallId: call.id } }) : null
      );
    }
    return h(
      "div",
      { class: "callout callout-connect", attrs: { role: "status" }, data: { connectServer: slug } },
      icon("shield"),
      h("div", { class: "callout-body" }, h("p", { class: "callout-title", text: "Connect " + server + " to continue" }), h("p", { class: "callout-text", text: text }), actions)
    );
  }

  /** Whether a tool call shows an app view (a `ui` part, or a view declared by its tool).
   *  A call a view made itself answers that view; it never opens a second one. */
  function hasView(call) {
    if (call.parentView) return false;
    if (call.view) return true;
    var parts = (call.result && call.result.parts) || [];
    return parts.some(function (p) {
      return p && p.type === "ui";
    });
  }

  /** The text fallback of a result: its text parts, joined. */
  function textFallback(call) {
    var parts = (call.result && call.result.parts) || [];
    return parts
      .filter(function (p) {
        return p && p.type === "text" && typeof p.text === "string";
      })
      .map(function (p) {
        return p.text;
      })
      .join("\n\n");
  }

  /**
   * A tool call → <section class="toolcall">.
   * opts.canAct: show Approve/Reject/Cancel buttons (they carry data-action attributes;
   * the page script handles the clicks). opts.compact: a smaller card (calls made by a view).
   */
  function renderToolCall(call, opts) {
    opts = opts || {};
    var statusCls = (STATUS[call.status] || { cls: "unknown" }).cls;
    var card = h("section", {
      class: "toolcall status-" + statusCls + (isToolError(call) ? " is-tool-error" : "") + (opts.compact ? " is-compact" : ""),
      data: { toolCallId: call.id, status: call.status },
      attrs: { "aria-label": "Tool call " + ((call.server && call.server.name) || "") + " " + call.tool },
    });
    var origin = ORIGINS[call.origin] || { label: String(call.origin || ""), icon: "info" };
    var originLabel = origin.label;
    if (call.origin === "user" && call.requestedBy && call.requestedBy.name) originLabel = call.requestedBy.name;
    var header = h(
      "header",
      { class: "tc-header" },
      h("span", { class: "tc-icon", attrs: { "aria-hidden": "true" } }, icon("wrench")),
      h("span", { class: "tc-title" }, h("span", { class: "tc-server", text: (call.server && (call.server.name || call.server.slug)) || "server" }), h("span", { class: "tc-sep", text: "/", attrs: { "aria-hidden": "true" } }), h("code", { class: "tc-tool", text: call.tool })),
      h("span", { class: "chip chip-origin origin-" + (call.origin || "unknown"), attrs: { title: "Called by: " + origin.label } }, icon(origin.icon), originLabel),
      h("span", { class: "tc-spacer" }),
      call.latencyMs !== null && call.latencyMs !== undefined ? h("span", { class: "tc-latency", text: formatLatency(call.latencyMs), attrs: { title: "Latency" } }) : null,
      (call.status === "running" || call.status === "streaming") && opts.canAct
        ? h("button", { class: "btn btn-ghost btn-xs tc-cancel", attrs: { type: "button", title: "Cancel this call" }, data: { action: "cancel-tool", toolCallId: call.id } }, icon("stop"), "Cancel")
        : null,
      renderStatusPill(call)
    );
    card.appendChild(header);

    if (call.status === "running" && (call.progress || opts.showIndeterminate)) card.appendChild(renderProgress(call.progress));

    if (call.approval && (call.status === "awaiting_approval" || call.approval.status !== "pending")) {
      card.appendChild(renderApproval(call, opts));
    }

    var body = h("div", { class: "tc-body" });
    var args = call.partialArguments && (call.status === "running" || call.status === "streaming") && !Object.keys(call.arguments || {}).length ? call.partialArguments : call.arguments;
    var argCount = args && typeof args === "object" ? Object.keys(args).length : 0;
    var hidesArgs = call.approval && call.approval.status === "pending";
    if (!hidesArgs && argCount > 0) {
      body.appendChild(
        h(
          "details",
          { class: "tc-args", data: { section: "arguments" } },
          h("summary", null, icon("chevron", "disclosure"), "Arguments", h("span", { class: "tc-args-count", text: argCount ? argCount + (argCount === 1 ? " field" : " fields") : "none" })),
          renderJson(args || {})
        )
      );
    }

    var parts = (call.result && call.result.parts) || [];
    var shown = parts.filter(function (p) {
      return p && p.type !== "ui" && !(Array.isArray(p.audience) && p.audience.length === 1 && p.audience[0] === "assistant");
    });
    if (shown.length) {
      var result = h("div", { class: "tc-result" + (isToolError(call) ? " is-error" : "") });
      shown.forEach(function (part) {
        var el = renderPart(part, opts);
        if (el) result.appendChild(el);
      });
      if ((hasView(call) || opts.compact) && !isToolError(call)) {
        // The view shows this result (its own, or the view that made the call): the text
        // version stays one click away instead of filling the thread.
        body.appendChild(
          h(
            "details",
            { class: "tc-args tc-fallback", data: { section: "fallback" } },
            h("summary", null, icon("chevron", "disclosure"), "Result as text", h("span", { class: "tc-args-count", text: shown.length === 1 ? "1 part" : shown.length + " parts" })),
            result
          )
        );
      } else {
        body.appendChild(result);
      }
    } else if (call.status === "success" && !hasView(call)) {
      body.appendChild(h("p", { class: "tc-empty", text: "The tool returned no content." }));
    }
    if (call.status === "success" && call.result && call.result.structured && !shown.length && !hasView(call)) {
      body.appendChild(renderJson(call.result.structured, "tc-structured"));
    }

    var decided = call.approval && call.approval.status !== "pending";
    if (call.error && call.error.code === "authorization_required") {
      body.appendChild(renderConnectCard(call, opts));
    } else if (call.error && (call.status === "error" || call.status === "cancelled" || (call.status === "rejected" && !decided))) {
      body.appendChild(renderToolError(call.error));
    }
    card.appendChild(body);
    return card;
  }

  // ---- result parts --------------------------------------------------------------------

  var LONG_TEXT_CHARS = 1600;
  var LONG_TEXT_LINES = 18;

  function renderTextPart(part) {
    var text = String(part.text || "");
    var wrap = h("div", { class: "part part-text" });
    if (part.uri) wrap.appendChild(h("div", { class: "part-label" }, icon("file"), h("span", { text: part.uri })));
    var pre = h("div", { class: "text-block", text: text });
    wrap.appendChild(pre);
    if (text.length > LONG_TEXT_CHARS || text.split("\n").length > LONG_TEXT_LINES) {
      wrap.classList.add("is-clamped");
      wrap.appendChild(h("button", { class: "btn btn-link btn-xs text-expand", text: "Show more", attrs: { type: "button", "aria-expanded": "false" }, data: { action: "expand-text" } }));
    }
    return wrap;
  }

  function renderLinkPart(part) {
    var href = part.clickable !== false ? safeLinkHref(part.uri) : null;
    var title = part.title || part.name || part.uri || "Link";
    var inner = [
      h("span", { class: "link-icon", attrs: { "aria-hidden": "true" } }, icon(href ? "link" : "file")),
      h(
        "span",
        { class: "link-text" },
        h("span", { class: "link-title", text: title }),
        part.description ? h("span", { class: "link-desc", text: part.description }) : null,
        h("span", { class: "link-uri", text: [part.uri, part.mimeType, part.size ? formatBytes(part.size) : ""].filter(Boolean).join(" · ") })
      ),
    ];
    if (href) {
      inner.push(icon("external", "link-ext"));
      return h("a", { class: "part link-card", attrs: { href: href, target: "_blank", rel: "noopener noreferrer nofollow" } }, inner);
    }
    return h("div", { class: "part link-card is-static" }, inner);
  }

  function renderErrorPart(part) {
    return h("div", { class: "part callout callout-warn", attrs: { role: "note" } }, icon("alert"), h("div", { class: "callout-body" }, h("p", { class: "callout-text", text: part.message || "Part of this result could not be shown." }), part.code ? h("code", { class: "callout-code", text: part.code }) : null));
  }

  function renderPart(part, opts) {
    if (!part || typeof part !== "object") return null;
    switch (part.type) {
      case "text":
        return renderTextPart(part);
      case "image":
      case "file":
        return renderMedia(part, opts);
      case "link":
        return renderLinkPart(part);
      case "error":
        return renderErrorPart(part);
      case "ui":
        return null; // views get their own row (renderViewRow)
      default:
        return h("div", { class: "part callout callout-muted" }, icon("info"), h("p", { class: "callout-text", text: "Unsupported content (" + String(part.type) + ")" }));
    }
  }

  function mediaKindOf(part) {
    return part.type === "image" ? "image" : part.mediaKind || "binary";
  }

  function mediaLabel(kind) {
    return { image: "Image", audio: "Audio", video: "Video" }[kind] || "File";
  }

  function sizeHint(el, w, hgt, maxW) {
    if (w > 0 && hgt > 0) {
      el.style.aspectRatio = w + " / " + hgt;
      el.style.width = Math.min(w, maxW) + "px";
    }
  }

  /**
   * An image or file part → an element carrying data-media-key (stable across re-renders,
   * so live media can be kept while a card is re-rendered) and data-asset-id for staged
   * assets (so `media` events update it in place).
   */
  function renderMedia(part, opts) {
    opts = opts || {};
    var kind = mediaKindOf(part);
    var asset = part.asset && typeof part.asset === "object" ? part.asset : null;
    var status = asset ? asset.status || "staged" : "inline";
    var src = asset ? asset.url : part.src;
    var key = asset && asset.id !== undefined ? "asset:" + asset.id : "src:" + strHash(typeof src === "string" ? src : "");
    var filename = part.filename || (asset && asset.filename) || "";
    var size = part.size || (asset && asset.size);
    var width = (asset && asset.width) || part.width;
    var height = (asset && asset.height) || part.height;
    var data = { mediaKey: key, mediaStatus: status, mediaKind: kind };
    if (asset && asset.id !== undefined) data.assetId = asset.id;

    var meta = [filename, part.mimeType, size ? formatBytes(size) : "", width && height ? width + "×" + height : "", asset && asset.duration ? formatDuration(asset.duration) : ""].filter(Boolean).join(" · ");

    if (status === "staged") {
      var box = h(
        "div",
        { class: "part media-placeholder media-" + kind, data: data, attrs: { role: "status", "aria-label": mediaLabel(kind) + " is being processed" } },
        h("div", { class: "shimmer", attrs: { "aria-hidden": "true" } }),
        h("div", { class: "media-placeholder-label" }, icon(kind === "image" ? "image" : kind === "audio" ? "music" : kind === "video" ? "video" : "file"), h("span", { text: "Processing " + mediaLabel(kind).toLowerCase() + "…" }), meta ? h("span", { class: "muted", text: meta }) : null)
      );
      if (kind === "image" || kind === "video") sizeHint(box, width, height, 420);
      return box;
    }
    if (status === "rejected") {
      return h(
        "div",
        { class: "part callout callout-warn media-rejected", data: data },
        icon("alert"),
        h("div", { class: "callout-body" }, h("p", { class: "callout-title", text: mediaLabel(kind) + " couldn't be stored" }), h("p", { class: "callout-text", text: (asset && asset.reason) || "The file was rejected." }), meta ? h("p", { class: "callout-meta", text: meta }) : null)
      );
    }

    var safe = safeMediaSrc(src, kind);
    if (!safe) {
      return h("div", { class: "part callout callout-warn", data: data }, icon("alert"), h("p", { class: "callout-text", text: mediaLabel(kind) + " has an unsupported source and was not loaded." }));
    }

    if (kind === "image") {
      var thumb = asset ? safeMediaSrc(asset.thumbnailUrl, "image") || safe : safe;
      var img = h("img", { attrs: { src: thumb, alt: filename || "Image from the tool result", loading: "lazy", decoding: "async", width: width || null, height: height || null } });
      return h(
        "figure",
        { class: "part media media-image", data: data },
        h("button", { class: "media-thumb", attrs: { type: "button", "aria-label": "Open image" + (filename ? " " + filename : "") }, data: { action: "lightbox", src: safe, alt: filename || "Image" } }, img, h("span", { class: "media-zoom", attrs: { "aria-hidden": "true" } }, icon("expand"))),
        meta && (filename || asset) ? h("figcaption", { class: "media-caption", text: meta }) : null
      );
    }

    var playable = toBlobUrl(safe, kind);
    if (!playable) {
      return h("div", { class: "part callout callout-warn", data: data }, icon("alert"), h("p", { class: "callout-text", text: mediaLabel(kind) + " data is damaged and could not be loaded." }));
    }
    if (kind === "audio") {
      return h(
        "figure",
        { class: "part media media-audio", data: data },
        h("div", { class: "media-audio-head" }, h("span", { class: "media-file-icon" }, icon("music")), h("span", { class: "media-audio-name", text: filename || "Audio" }), h("span", { class: "muted", text: [part.mimeType, size ? formatBytes(size) : ""].filter(Boolean).join(" · ") })),
        h("audio", { attrs: { controls: true, preload: "metadata", src: playable } })
      );
    }
    var canPlay = function (mime) {
      var probe = document.createElement(kind === "audio" ? "audio" : "video");
      return !!(probe.canPlayType && probe.canPlayType(mime || ""));
    };
    if (kind === "video" && !canPlay(part.mimeType)) {
      // A format this browser cannot play (e.g. AVI): show the poster and offer the file.
      var still = asset ? safeMediaSrc(asset.posterUrl || asset.thumbnailUrl, "image") : null;
      return h(
        "figure",
        { class: "part media media-video is-unplayable", data: data },
        still ? h("img", { attrs: { src: still, alt: (filename || "Video") + " (first frame)", loading: "lazy" } }) : null,
        h(
          "a",
          { class: "file-card", attrs: { href: playable, download: filename || "video", rel: "noopener" } },
          h("span", { class: "media-file-icon", attrs: { "aria-hidden": "true" } }, icon("video")),
          h("span", { class: "file-card-text" }, h("span", { class: "file-card-name", text: filename || "Video" }), h("span", { class: "file-card-meta", text: [part.mimeType, size ? formatBytes(size) : "", "this browser cannot play it"].filter(Boolean).join(" · ") })),
          h("span", { class: "file-card-action" }, icon("download"), "Download")
        )
      );
    }
    if (kind === "video") {
      var poster = asset ? safeMediaSrc(asset.posterUrl || asset.thumbnailUrl, "image") : null;
      var video = h("video", { attrs: { controls: true, preload: "metadata", playsinline: true, src: playable, poster: poster, width: width || null, height: height || null } });
      return h("figure", { class: "part media media-video", data: data }, video, meta ? h("figcaption", { class: "media-caption", text: meta }) : null);
    }
    var name = filename || "download";
    return h(
      "a",
      { class: "part file-card", data: data, attrs: { href: playable, download: name, rel: "noopener" } },
      h("span", { class: "media-file-icon", attrs: { "aria-hidden": "true" } }, icon("file")),
      h("span", { class: "file-card-text" }, h("span", { class: "file-card-name", text: name }), h("span", { class: "file-card-meta", text: [part.mimeType, size ? formatBytes(size) : ""].filter(Boolean).join(" · ") })),
      h("span", { class: "file-card-action" }, icon("download"), "Download")
    );
  }

  // ---- views ---------------------------------------------------------------------------

  /**
   * The full-width row that hosts a tool call's app view. The frame itself belongs to
   * static/chat/views.js (window.AtriumViews.mount); slots:
   *   [data-slot="display-modes"]  header area for display-mode buttons
   *   [data-slot="frame"]          where the frame (or the placeholder) goes
   */
  function renderViewRow(call) {
    var appName = (call.server && (call.server.name || call.server.slug)) || "App";
    var row = h(
      "div",
      { class: "view-row" + (call.view && call.view.prefersBorder === false ? " is-borderless" : ""), data: { toolCallId: call.id }, attrs: { role: "region", "aria-label": appName + " view" } },
      h(
        "div",
        { class: "view-header" },
        h("span", { class: "view-app-icon", attrs: { "aria-hidden": "true" } }, icon("layout")),
        h("span", { class: "view-app-name", text: appName }),
        h("span", { class: "view-tool", text: call.tool }),
        h("span", { class: "view-spacer" }),
        h("div", { class: "view-modes", data: { slot: "display-modes" } })
      ),
      h("div", { class: "view-body", data: { slot: "frame" } })
    );
    return row;
  }

  /** The placeholder shown when no view host is loaded: the result's text fallback. */
  function renderViewPlaceholder(call) {
    var text = textFallback(call);
    var state = call.status === "running" ? "The app will appear when the tool finishes." : text ? "" : "This result has an interactive view.";
    return h(
      "div",
      { class: "view-placeholder" },
      h("div", { class: "view-placeholder-head" }, icon("app"), h("strong", { text: "Interactive view" })),
      state ? h("p", { class: "muted", text: state }) : null,
      text ? h("div", { class: "text-block", text: text }) : null
    );
  }

  /** Mount a view row through window.AtriumViews, or show the placeholder. */
  function mountViewRow(row, call, client) {
    var slot = row.querySelector('[data-slot="frame"]');
    if (window.AtriumViews && typeof window.AtriumViews.mount === "function") {
      try {
        window.AtriumViews.mount(row, call, client);
        row.classList.add("is-mounted");
        return true;
      } catch (e) {
        if (window.console) console.error("Atrium: mounting a view failed", e);
      }
    }
    slot.textContent = "";
    slot.appendChild(renderViewPlaceholder(call));
    return false;
  }

  // ---- presentational interactions (no network) ----------------------------------------

  var lightbox = null;
  function openLightbox(src, alt) {
    if (!safeMediaSrc(src, "image")) return;
    if (!lightbox) {
      lightbox = h(
        "dialog",
        { class: "lightbox", attrs: { "aria-label": "Image viewer" } },
        h("button", { class: "icon-btn lightbox-close", attrs: { type: "button", "aria-label": "Close" }, data: { action: "lightbox-close" } }, icon("x")),
        h("img", { class: "lightbox-img", attrs: { alt: "" } })
      );
      lightbox.addEventListener("click", function (event) {
        if (event.target === lightbox || event.target.closest('[data-action="lightbox-close"]')) lightbox.close();
      });
      document.body.appendChild(lightbox);
    }
    var img = lightbox.querySelector("img");
    img.src = src;
    img.alt = alt || "";
    if (typeof lightbox.showModal === "function") lightbox.showModal();
    else lightbox.setAttribute("open", "");
  }

  document.addEventListener("click", function (event) {
    var target = event.target instanceof Element ? event.target.closest("[data-action]") : null;
    if (!target) return;
    var action = target.getAttribute("data-action");
    if (action === "lightbox") {
      event.preventDefault();
      openLightbox(target.getAttribute("data-src"), target.getAttribute("data-alt"));
    } else if (action === "expand-text") {
      var part = target.closest(".part-text");
      var expanded = part.classList.toggle("is-expanded");
      target.textContent = expanded ? "Show less" : "Show more";
      target.setAttribute("aria-expanded", String(expanded));
    }
  });

  window.AtriumRender = {
    renderMessage: renderMessage,
    renderMessageBody: renderMessageBody,
    updateStreamingText: updateStreamingText,
    renderToolCall: renderToolCall,
    renderProgress: renderProgress,
    renderApproval: renderApproval,
    renderAllowances: renderAllowances,
    renderPart: renderPart,
    renderMedia: renderMedia,
    renderJson: renderJson,
    renderViewRow: renderViewRow,
    renderViewPlaceholder: renderViewPlaceholder,
    mountViewRow: mountViewRow,
    hasView: hasView,
    textFallback: textFallback,
    openLightbox: openLightbox,
    icon: icon,
    h: h,
    util: {
      authorName: authorName,
      authorKey: authorKey,
      initials: initials,
      hueClass: hueClass,
      formatTime: formatTime,
      formatFull: formatFull,
      formatDay: formatDay,
      dayKey: dayKey,
      formatRelative: formatRelative,
      formatBytes: formatBytes,
      formatLatency: formatLatency,
      safeLinkHref: safeLinkHref,
      safeMediaSrc: safeMediaSrc,
    },
  };
})();
