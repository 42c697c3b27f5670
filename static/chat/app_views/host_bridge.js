/* Messages between the host and an app view: JSON-RPC in, the server decides (view.request). */
import { h, icon } from "../dom.js";
import { HOST_INFO, KNOWN_PROTOCOLS, LOG_BURST, MAX_MESSAGE_DEPTH, PROTOCOL_VERSION } from "./config.js";
import { viewMethod } from "./methods.js";
import { request, rpcError } from "./rpc.js";

function sanitizeFilename(name) {
  let base = String(name || "")
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
    const dot = base.lastIndexOf(".");
    const ext = dot > 0 && base.length - dot <= 10 ? base.slice(dot) : "";
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
  const deepest = new Map();
  const stack = [[value, 0]];
  let steps = 0;
  while (stack.length) {
    const [v, depth] = stack.pop();
    if (!v || typeof v !== "object") continue;
    if (depth >= limit || ++steps > 1000000) return true;
    if (deepest.has(v) && deepest.get(v) >= depth) continue;
    deepest.set(v, depth);
    for (const key of Object.keys(v)) stack.push([v[key], depth + 1]);
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
  const hasId = msg.id !== undefined && msg.id !== null;
  const params = msg.params && typeof msg.params === "object" && !Array.isArray(msg.params) ? msg.params : {};
  if (typeof msg.method === "string") {
    if (hasId) this.onRequest(msg.id, msg.method, params);
    else this.onNotification(msg.method, params);
    return;
  }
  if (hasId && Object.prototype.hasOwnProperty.call(this.hostPending, msg.id)) {
    const done = this.hostPending[msg.id];
    delete this.hostPending[msg.id];
    done(msg);
  }
}

/* Host steps: what the browser itself does for a method of the table (methods.js), called
 * with the AppView as `this`. A server row without one is simply forwarded. */
const notificationSteps = {
  "ui/notifications/sandbox-proxy-ready": function () {
    this.onProxyReady();
  },
  "ui/notifications/initialized": function () {
    this.protocol = this.protocol || "mcp";
    this.markReady();
  },
  "ui/notifications/size-changed": function (params) {
    this.onSize(params);
  },
  "ui/notifications/sandbox-escape": function () {
    // Esc pressed inside the frame (the proxy relays it: key events in a cross-origin
    // frame never reach this page). Anyone may send it; it only leaves full screen.
    if (this.mode === "fullscreen") this.setMode("inline", "user");
  },
  "ui/notifications/request-teardown": function () {
    this.honourTeardown();
  },
};

const requestSteps = {
  "ui/initialize": function (id, params) {
    this.protocol = "mcp";
    this.appCaps = params.appCapabilities && typeof params.appCapabilities === "object" ? params.appCapabilities : {};
    this.appInfo = params.appInfo;
    const version = KNOWN_PROTOCOLS.indexOf(params.protocolVersion) >= 0 ? params.protocolVersion : PROTOCOL_VERSION;
    const context = this.hostContext();
    this.lastContext = context;
    this.respond(id, { protocolVersion: version, hostInfo: HOST_INFO, hostCapabilities: this.hostCapabilities(), hostContext: context });
    this.renderModeButtons();
  },
  "ui/request-display-mode": function (id, params) {
    this.requestDisplayMode(id, params);
  },
  "ui/open-link": function (id, params) {
    this.openLink(id, params);
  },
  "ui/message": function (id, params) {
    this.sendMessage(id, params);
  },
  "ui/download-file": function (id, params) {
    this.download(id, params);
  },
  "openai/requestModal": function (id, params) {
    this.openModal(id, params);
  },
  "atrium/setWidgetState": function (id, params) {
    this.setWidgetState(id, params);
  },
};

function onNotification(method, params) {
  const row = viewMethod(method, "notification");
  if (!row) return; // other notifications have no host meaning
  // Forwarded under the name the view used: the server knows the aliases too.
  if (row.side === "server" && (row.pace !== "burst" || this.allowLog())) this.notifyServer(method, params, row.pace === "latest");
  const step = notificationSteps[row.name];
  if (step) step.call(this, params);
}

function onRequest(id, method, params) {
  const row = viewMethod(method, "request");
  const step = row && requestSteps[row.name];
  if (step) {
    step.call(this, id, params);
    return;
  }
  // Every other request goes to the server, which decides (an unknown method included:
  // it answers method_not_found).
  this.forward(method, params).then(
    (result) => this.respond(id, result),
    (err) => this.respondError(id, rpcError(err))
  );
}

/** A view request → the server (view.request). Retries once with a fresh token. */
function forward(method, params, retried) {
  if (!this.token) return Promise.reject({ code: "not_ready", message: "The view is not open.", jsonrpcCode: -32000 });
  return request(this.client, { type: "view.request", token: this.token, method: method, params: params || {} }).catch((err) => {
    if (err.code === "invalid_token" && !retried && !this.closed) {
      return this.refreshToken().then(() => this.forward(method, params, true));
    }
    throw err;
  });
}

function refreshToken() {
  return request(this.client, { type: "view.open", toolCallId: this.id }).then((reply) => {
    if (reply && reply.token) this.token = reply.token;
  });
}

function notifyServer(method, params, throttled) {
  const send = () => {
    if (!this.token) return;
    request(this.client, { type: "view.notify", token: this.token, method: method, params: params || {} }).catch(() => {});
  };
  if (!throttled) {
    send();
    return;
  }
  // Size reports can come in bursts: tell the server at most once a second (the last one).
  this.pendingSize = params;
  if (this.sizeNotifyTimer) return;
  this.sizeNotifyTimer = setTimeout(() => {
    this.sizeNotifyTimer = null;
    params = this.pendingSize;
    send();
  }, 1000);
}

function allowLog() {
  const now = Date.now();
  this.logTimes = this.logTimes.filter((t) => now - t < 10000);
  if (this.logTimes.length >= LOG_BURST) return false;
  this.logTimes.push(now);
  return true;
}

function showNotice(text, url) {
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

function download(id, params) {
  const items = [];
  (Array.isArray(params.contents) ? params.contents : []).forEach((item) => {
    if (!item || item.type !== "resource" || !item.resource || typeof item.resource !== "object") return;
    const r = item.resource;
    // Never the app's type: a blob: URL lives on the app origin (see render.js toBlobUrl).
    const type = "application/octet-stream";
    const name = sanitizeFilename(r.uri);
    let blob = null;
    if (typeof r.text === "string") blob = new Blob([r.text], { type: type });
    else if (typeof r.blob === "string") {
      try {
        const bin = atob(r.blob);
        const bytes = new Uint8Array(bin.length);
        for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
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
    () => {
      const names = items.map((i) => i.name).join(", ");
      if (!window.confirm(this.appName() + " wants to download " + (items.length === 1 ? "a file" : items.length + " files") + ": " + names + "\n\nSave?")) {
        this.respondError(id, { code: -32000, message: "The user declined the download.", data: { reason: "user_declined" } });
        return;
      }
      items.forEach((item) => {
        const url = URL.createObjectURL(item.blob);
        const a = h("a", { attrs: { href: url, download: item.name } });
        document.body.appendChild(a);
        a.click();
        a.remove();
        setTimeout(() => URL.revokeObjectURL(url), 30000);
      });
      this.respond(id, {});
    },
    (err) => this.respondError(id, rpcError(err))
  );
}

export const bridgeMethods = { post, respond, respondError, onMessage, onRpc, onNotification, onRequest, forward, refreshToken, notifyServer, allowLog, showNotice, download };
