/* One view's end of the host bridge: JSON-RPC with the view, every request to the server
 * (view.request), which decides.
 *
 * A HostBridge keeps its own per-document state (the token and origin, the negotiated
 * protocol, the app's capabilities, requests the host awaits, the pace of forwarded
 * notifications) and reaches the rest of its view only through the collaborators its
 * constructor names. Which methods exist and which are the server's: methods.js; what the
 * browser itself does for a method: the host steps below.
 *
 * Other collaborators use: post, respond, respondError, forward, notifyServer, allowLog,
 * stopPacing, onMessage, and the state fields. */
import { HOST_INFO, KNOWN_PROTOCOLS, LOG_BURST, MAX_MESSAGE_DEPTH, PROTOCOL_VERSION } from "./config.js";
import { viewMethod } from "./methods.js";
import { request, rpcError } from "./rpc.js";
import { ViewFiles } from "./file_chooser.js";
import { afterSignIn, needsSignIn } from "./sign_in_retry.js";
import { ViewTools } from "./view_tools.js";

/** Whether `value` nests deeper than `limit` levels. Iterative (no stack to overflow);
 *  an object shared by several paths is walked again only when reached deeper, so a
 *  crafted graph cannot make it run long (and absurdly large values count as too deep).
 *  templates/sandbox/proxy.html has its twin. */
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

/* Host steps: what the browser itself does for a method of the table (methods.js), given
 * the bridge. A server row without one is simply forwarded. */
const notificationSteps = {
  "ui/notifications/sandbox-proxy-ready": (bridge) => bridge.lifecycle.onProxyReady(),
  "ui/notifications/initialized": (bridge) => {
    bridge.protocol = bridge.protocol || "mcp";
    bridge.lifecycle.markReady();
    bridge.viewTools.start(); // app-provided tools (view_tools.js)
  },
  "notifications/tools/list_changed": (bridge) => bridge.viewTools.list(),
  "ui/notifications/size-changed": (bridge, params) => bridge.frame.onSize(params),
  "ui/notifications/sandbox-escape": (bridge) => {
    // Esc pressed inside the frame (the proxy relays it: key events in a cross-origin
    // frame never reach this page). Anyone may send it; it only leaves full screen.
    if (bridge.modes.mode === "fullscreen") bridge.modes.setMode("inline", "user");
    else if (bridge.modes.mode === "split") bridge.modes.leavePane(); // back to the composer
  },
  "ui/notifications/request-teardown": (bridge) => bridge.lifecycle.honourTeardown(),
};

const requestSteps = {
  "ui/initialize": (bridge, id, params) => bridge.initialize(id, params),
  "ui/request-display-mode": (bridge, id, params) => bridge.modes.request(id, params),
  "ui/open-link": (bridge, id, params) => bridge.cards.openLink(id, params),
  "ui/message": (bridge, id, params) => bridge.cards.sendMessage(id, params),
  // Files (file_chooser.js): saved in the thread; the body of an upload; the host's chooser.
  "ui/download-file": (bridge, id, params) => bridge.files.save(id, params),
  "openai/uploadFile": (bridge, id, params) => bridge.files.upload(id, params),
  "openai/selectFiles": (bridge, id, params) => bridge.files.select(id, params),
  "openai/requestModal": (bridge, id, params) => bridge.openai.openModal(id, params),
  "openai/setOpenInAppUrl": (bridge, id, params) => bridge.openai.setOpenInAppUrl(id, params),
  "atrium/setWidgetState": (bridge, id, params) => bridge.openai.setWidgetState(id, params),
};

export class HostBridge {
  /** `id`, `client`: the view's tool call and its thread client; `isClosed()`: whether the
   *  view was destroyed (no token refresh then); `appName()`: for the file chooser.
   *  `frame` (the window posts go to, inline size), `lifecycle` (handshake, teardown),
   *  `context` (hostContext), `modes` (display modes), `cards` (link and message cards),
   *  `openai` (Apps SDK modal and widget state), `mcpUi` (legacy MCP-UI messages). */
  constructor({ id, client, isClosed, appName, frame, lifecycle, context, modes, cards, openai, mcpUi }) {
    this.id = id;
    this.client = client;
    this.isClosed = isClosed;
    this.appName = appName;
    this.frame = frame;
    this.lifecycle = lifecycle;
    this.context = context;
    this.modes = modes;
    this.cards = cards;
    this.openai = openai;
    this.mcpUi = mcpUi;
    this.token = null; // the view's capability token (view.open; refreshed once when it expires)
    this.origin = null; // the frame's sandbox origin: posts go there, messages must come from it
    this.appInfo = null;
    this.pendingSize = null;
    this.viewTools = new ViewTools(this);
    this.files = new ViewFiles(this);
    this.reset();
  }

  /** Per document: nothing negotiated, nothing awaited. */
  reset() {
    if (this.viewTools) this.viewTools.stop(); // a new document: the old one's tools go
    this.requestedProtocol = null; // the version the view asked for (a v2 draft: view_tools.js)
    this.ready = false; // the view said ui/notifications/initialized (or MCP-UI iframe-ready)
    this.protocol = null; // "mcp" | "legacy"
    this.appCaps = null; // ui/initialize's appCapabilities
    this.hostPending = {}; // id of a request the host sent → its answer's callback
    this.logTimes = [];
    this.sizeNotifyTimer = null;
  }

  /** No more paced size reports to the server (the frame goes). */
  stopPacing() {
    clearTimeout(this.sizeNotifyTimer);
    this.viewTools.stop();
    this.files.close();
  }

  post(message) {
    const target = this.frame.window();
    if (!target) return;
    try {
      target.postMessage(message, this.origin);
    } catch (e) {
      console.error("Atrium: could not post to a view", e);
    }
  }

  respond(id, result) {
    this.post({ jsonrpc: "2.0", id: id, result: result === undefined ? {} : result });
  }

  respondError(id, error) {
    this.post({ jsonrpc: "2.0", id: id, error: error });
  }

  onMessage(data) {
    if (!data || typeof data !== "object") return;
    if (nestsDeeperThan(data, MAX_MESSAGE_DEPTH)) {
      // Answered here, with its id (the proxy answers what the browser could not even carry
      // this far; the server's JSON parser would refuse the frame without knowing its rid).
      if (data.jsonrpc === "2.0" && typeof data.method === "string" && data.id !== undefined && data.id !== null && (typeof data.id === "string" || typeof data.id === "number")) {
        this.respondError(data.id, { code: -32600, message: "Invalid Request: nested too deeply (more than " + MAX_MESSAGE_DEPTH + " levels).", data: { reason: "too_deep" } });
      } else if (typeof data.type === "string" && (typeof data.messageId === "string" || typeof data.messageId === "number")) {
        this.mcpUi.post("ui-message-response", data.messageId, { messageId: data.messageId, error: { code: "too_deep", message: "The message is nested too deeply." } });
      }
      return;
    }
    if (data.jsonrpc === "2.0") this.onRpc(data);
    else if (typeof data.type === "string") this.mcpUi.onMessage(data);
  }

  onRpc(msg) {
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

  onNotification(method, params) {
    const row = viewMethod(method, "notification");
    if (!row) return; // other notifications have no host meaning
    // Forwarded under the name the view used: the server knows the aliases too.
    if (row.side === "server" && (row.pace !== "burst" || this.allowLog())) this.notifyServer(method, params, row.pace === "latest");
    const step = notificationSteps[row.name];
    if (step) step(this, params);
  }

  onRequest(id, method, params) {
    const row = viewMethod(method, "request");
    const step = row && requestSteps[row.name];
    if (step) {
      step(this, id, params);
      return;
    }
    // Every other request goes to the server, which decides (an unknown method included:
    // it answers method_not_found).
    this.forward(method, params).then(
      (result) => this.respond(id, result),
      (err) => this.respondError(id, rpcError(err))
    );
  }

  /** ui/initialize: the protocol, the app's capabilities, and the host's answer. */
  initialize(id, params) {
    this.protocol = "mcp";
    this.appCaps = params.appCapabilities && typeof params.appCapabilities === "object" ? params.appCapabilities : {};
    this.appInfo = params.appInfo;
    this.requestedProtocol = typeof params.protocolVersion === "string" ? params.protocolVersion.slice(0, 40) : null;
    const version = KNOWN_PROTOCOLS.indexOf(params.protocolVersion) >= 0 ? params.protocolVersion : PROTOCOL_VERSION;
    const hostContext = this.context.current();
    this.context.last = hostContext;
    this.respond(id, { protocolVersion: version, hostInfo: HOST_INFO, hostCapabilities: this.context.capabilities(), hostContext });
    this.modes.renderButtons();
  }

  /** A view request → the server (view.request). Retries once with a fresh token. */
  forward(method, params, retried) {
    if (!this.token) return Promise.reject({ code: "not_ready", message: "The view is not open.", jsonrpcCode: -32000 });
    return request(this.client, { type: "view.request", token: this.token, method: method, params: params || {} }).catch((err) => {
      if (err.code === "invalid_token" && !retried && !this.isClosed()) {
        return this.refreshToken().then(() => this.forward(method, params, true));
      }
      // A call that needs a sign-in waits for it, then goes again (sign_in_retry.js).
      if (method === "tools/call" && needsSignIn(err) && !this.isClosed()) {
        return afterSignIn(err, () => this.isClosed()).then(() => this.forward(method, params, retried));
      }
      throw err;
    });
  }

  refreshToken() {
    return request(this.client, { type: "view.open", toolCallId: this.id }).then((reply) => {
      if (reply && reply.token) this.token = reply.token;
    });
  }

  notifyServer(method, params, throttled) {
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

  allowLog() {
    const now = Date.now();
    this.logTimes = this.logTimes.filter((t) => now - t < 10000);
    if (this.logTimes.length >= LOG_BURST) return false;
    this.logTimes.push(now);
    return true;
  }
}
