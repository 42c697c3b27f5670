/* Messages between the host and an app view: JSON-RPC in, the server decides (view.request). */
import { h, icon } from "../dom.js";
import { HOST_INFO, KNOWN_PROTOCOLS, LOG_BURST, MAX_MESSAGE_DEPTH, PROTOCOL_VERSION } from "./config.js";
import { request, rpcError } from "./rpc.js";

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

function post(message) {
  if (!this.frame || !this.frame.contentWindow) return;
  try {
    this.frame.contentWindow.postMessage(message, this.origin);
  } catch (e) {
    console.error("Atrium: could not post to a view", e);
  }
}

function respond(id, result) {
  this.post({ jsonrpc: "2.0", id: id, result: result === undefined ? {} : result });
}

function respondError(id, error) {
  this.post({ jsonrpc: "2.0", id: id, error: error });
}

/** Whether `value` nests deeper than `limit` levels. Iterative (no stack to overflow);
 *  an object shared by several paths is walked again only when reached deeper, so a
 *  crafted graph cannot make it run long (and absurdly large values count as too deep). */
export function nestsDeeperThan(value, limit) {
  var deepest = new Map();
  var stack = [[value, 0]];
  var steps = 0;
  while (stack.length) {
    var top = stack.pop();
    var v = top[0];
    var depth = top[1];
    if (!v || typeof v !== "object") continue;
    if (depth >= limit || ++steps > 1000000) return true;
    if (deepest.has(v) && deepest.get(v) >= depth) continue;
    deepest.set(v, depth);
    var keys = Object.keys(v);
    for (var i = 0; i < keys.length; i++) stack.push([v[keys[i]], depth + 1]);
  }
  return false;
}

function onMessage(data) {
  if (!data || typeof data !== "object") return;
  if (nestsDeeperThan(data, MAX_MESSAGE_DEPTH)) {
    // Answered here, with its id (the proxy answers what the browser could not even carry
    // this far; the server's JSON parser would refuse the frame without knowing its rid).
    if (data.jsonrpc === "2.0" && typeof data.method === "string" && data.id !== undefined && data.id !== null && (typeof data.id === "string" || typeof data.id === "number")) {
      this.respondError(data.id, { code: -32600, message: "Invalid Request: nested too deeply (more than " + MAX_MESSAGE_DEPTH + " levels).", data: { reason: "too_deep" } });
    } else if (typeof data.type === "string" && (typeof data.messageId === "string" || typeof data.messageId === "number")) {
      this.legacyPost("ui-message-response", data.messageId, { messageId: data.messageId, error: { code: "too_deep", message: "The message is nested too deeply." } });
    }
    return;
  }
  if (data.jsonrpc === "2.0") this.onRpc(data);
  else if (typeof data.type === "string") this.onLegacy(data);
}

function onRpc(msg) {
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
}

function onNotification(method, params) {
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
    case "ui/notifications/sandbox-escape":
      // Esc pressed inside the frame (the proxy relays it: key events in a cross-origin
      // frame never reach this page). Anyone may send it; it only leaves full screen.
      if (this.mode === "fullscreen") this.setMode("inline", "user");
      return;
    case "ui/notifications/request-teardown":
      this.notifyServer(method, params);
      this.honourTeardown();
      return;
    default:
      return; // other notifications have no host meaning
  }
}

function onRequest(id, method, params) {
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
    case "ui/message":
      this.sendMessage(id, params);
      return;
    case "ui/download-file":
      this.download(id, params);
      return;
    case "openai/requestModal":
      this.openModal(id, params);
      return;
    case "atrium/setWidgetState":
      this.setWidgetState(id, params);
      return;
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
}

/** A view request → the server (view.request). Retries once with a fresh token. */
function forward(method, params, retried) {
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
}

function refreshToken() {
  var self = this;
  return request(this.client, { type: "view.open", toolCallId: this.id }).then(function (reply) {
    if (reply && reply.token) self.token = reply.token;
  });
}

function notifyServer(method, params, throttled) {
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
}

function allowLog() {
  var now = Date.now();
  this.logTimes = this.logTimes.filter(function (t) {
    return now - t < 10000;
  });
  if (this.logTimes.length >= LOG_BURST) return false;
  this.logTimes.push(now);
  return true;
}

function showNotice(text, url) {
  if (!this.notice) return;
  var self = this;
  this.notice.textContent = "";
  this.notice.appendChild(document.createTextNode(text));
  if (url) {
    var a = h("a", { attrs: { href: url, target: "_blank", rel: "noopener noreferrer" }, text: url.length > 80 ? url.slice(0, 77) + "…" : url });
    this.notice.appendChild(a);
    this.notice.appendChild(icon("external", "view-icon"));
  }
  this.notice.hidden = false;
  clearTimeout(this.noticeTimer);
  this.noticeTimer = setTimeout(function () {
    if (self.notice) self.notice.hidden = true;
  }, 8000);
}

function download(id, params) {
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
}

export const bridgeMethods = { post, respond, respondError, onMessage, onRpc, onNotification, onRequest, forward, refreshToken, notifyServer, allowLog, showNotice, download };
