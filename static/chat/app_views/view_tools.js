/* App-provided tools (MCP Apps draft spec, issue 27; docs/view-bridge.md "Draft-spec
 * features"): a view that declares the app capability `tools` is asked for its tools
 * (`tools/list`, or `ui/list-view-tools` when it negotiated the v2 draft) once it is ready
 * and again on `notifications/tools/list_changed`; the page registers them with the server
 * (view.tools), which offers them to the model in this person's turns while the view stays
 * open here. The server's call (`viewtool.call`) is sent to the view as `tools/call` (v2:
 * `ui/call-view-tool`) and its answer returned (viewtool.answer) under the call's signed
 * ticket. A call the server gives up on, or a view that goes mid-call, gets
 * `ui/notifications/tool-cancelled`; the view's tools are withdrawn when it goes. */
import { forCall, nextHostRequestId } from "./registry.js";

const LIST_WAIT_MS = 10000;
const CALL_WAIT_MS = 115000; // within the server's VIEW_TOOL_TIMEOUT (120 s)
const subscribed = new WeakSet();

/** Whether the view asked for the v2 draft of the protocol (ext-apps BREAKING.md). */
export function isV2(version) {
  return typeof version === "string" && /draft|v2/i.test(version);
}

function subscribe(client) {
  if (!client || typeof client.on !== "function" || subscribed.has(client)) return;
  subscribed.add(client);
  client.on("viewtool.call", (frame) => {
    let taken = false;
    forCall(frame.toolCallId, (v) => {
      if (taken || !v.bridge || !v.bridge.ready || !v.bridge.viewTools) return;
      taken = true;
      v.bridge.viewTools.call(frame);
    });
    if (!taken) {
      client.send({ type: "viewtool.answer", ticket: frame.ticket, error: { code: "view_closed", message: "The view is not open in this page." } }).catch(() => {});
    }
  });
  client.on("viewtool.cancel", (frame) => {
    forCall(frame.toolCallId, (v) => {
      if (v.bridge && v.bridge.viewTools) v.bridge.viewTools.cancel(frame.ticket, frame.reason);
    });
  });
}

export class ViewTools {
  constructor(bridge) {
    this.bridge = bridge;
    this.registered = false;
    this.pending = new Map(); // ticket → the host request id sent to the view
    subscribe(bridge.client);
  }

  /** The view said it is ready: list its tools if it provides any. */
  start() {
    const caps = this.bridge.appCaps;
    if (caps && caps.tools && typeof caps.tools === "object") this.list();
  }

  v2() {
    return isV2(this.bridge.requestedProtocol);
  }

  /** A request the host sends the view; resolves with its result, rejects with its error. */
  ask(method, params, waitMs) {
    const bridge = this.bridge;
    return new Promise((resolve, reject) => {
      const id = nextHostRequestId();
      const timer = setTimeout(() => {
        delete bridge.hostPending[id];
        reject({ code: "timeout", message: "The view did not answer in time." });
      }, waitMs);
      bridge.hostPending[id] = (msg) => {
        clearTimeout(timer);
        if (msg.error) reject({ code: "view_error", message: String((msg.error && msg.error.message) || "The view refused the call.") });
        else resolve(msg.result);
      };
      bridge.post({ jsonrpc: "2.0", id: id, method: method, params: params || {} });
      this.lastId = id;
    });
  }

  /** Ask the view for its tools and register them with the server. */
  list() {
    const bridge = this.bridge;
    if (!bridge.token) return Promise.resolve();
    return this.ask(this.v2() ? "ui/list-view-tools" : "tools/list", {}, LIST_WAIT_MS)
      .then((result) => {
        const tools = result && Array.isArray(result.tools) ? result.tools : [];
        return bridge.client.send({ type: "view.tools", token: bridge.token, tools: tools, protocol: bridge.requestedProtocol || "" });
      })
      .then((reply) => {
        this.registered = !!(reply && reply.ok && reply.result && reply.result.tools && reply.result.tools.length);
      })
      .catch((err) => console.warn("Atrium: could not list a view's tools", err));
  }

  /** The server's call of one of the view's tools. */
  call(frame) {
    const bridge = this.bridge;
    const method = frame.method === "ui/call-view-tool" || this.v2() ? "ui/call-view-tool" : "tools/call";
    const answer = (body) => bridge.client.send(Object.assign({ type: "viewtool.answer", ticket: frame.ticket }, body)).catch(() => {});
    const promise = this.ask(method, { name: frame.name, arguments: frame.arguments || {} }, CALL_WAIT_MS);
    this.pending.set(frame.ticket, this.lastId);
    promise.then(
      (result) => {
        if (this.pending.delete(frame.ticket)) answer({ result: result || {} });
      },
      (err) => {
        if (this.pending.delete(frame.ticket)) answer({ error: err });
      }
    );
  }

  /** The server stopped waiting (the turn was stopped, or no answer in time). */
  cancel(ticket, reason) {
    const id = this.pending.get(ticket);
    if (id === undefined) return;
    this.pending.delete(ticket);
    delete this.bridge.hostPending[id];
    this.bridge.post({ jsonrpc: "2.0", method: "ui/notifications/tool-cancelled", params: { reason: reason || "cancelled" } });
  }

  /** The view goes (its frame, or its document): calls in flight fail and are cancelled
   *  in the view; its tools are withdrawn. */
  stop() {
    const bridge = this.bridge;
    this.pending.forEach((id, ticket) => {
      delete bridge.hostPending[id];
      bridge.client.send({ type: "viewtool.answer", ticket: ticket, error: { code: "view_closed", message: "The view was closed." } }).catch(() => {});
      bridge.post({ jsonrpc: "2.0", method: "ui/notifications/tool-cancelled", params: { reason: "The view was closed." } });
    });
    this.pending.clear();
    if (this.registered) {
      this.registered = false;
      bridge.client.send({ type: "view.tools_withdraw", toolCallId: bridge.id }).catch(() => {});
    }
  }
}
