/* Requests to the server over the thread socket, and their errors in JSON-RPC shape. */
import { VIEW_CALL_WAIT_MS } from "./config.js";

export function same(a, b) {
  if (a === b) return true;
  try {
    return JSON.stringify(a) === JSON.stringify(b);
  } catch (e) {
    return false;
  }
}

export function clamp(v, lo, hi) {
  return Math.max(lo, Math.min(hi, v));
}

export function originOf(url) {
  try {
    return new URL(url, window.location.href).origin;
  } catch (e) {
    return null;
  }
}

export function dataOf(arg) {
  // client.on handlers get (data, frame); be lenient with (frame).
  if (arg && typeof arg === "object" && arg.kind && arg.data && typeof arg.seq === "number") return arg.data;
  return arg;
}

/** client.send → the reply's result, or a rejection with {code, message, jsonrpcCode}. */
export function request(client, msg) {
  // A view's tools/call may wait for a member's approval: as long as the server does.
  // So may a view's sampling/createMessage (its consent card, then the model).
  const opts = msg && (msg.method === "tools/call" || msg.method === "sampling/createMessage") ? { timeoutMs: VIEW_CALL_WAIT_MS } : undefined;
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

export function normalizeError(err) {
  if (err && typeof err === "object" && !(err instanceof Error)) {
    return { code: String(err.code || "error"), message: String(err.message || "The request failed."), jsonrpcCode: typeof err.jsonrpcCode === "number" ? err.jsonrpcCode : null, details: err.details };
  }
  return { code: "unavailable", message: (err && err.message) || "The server did not answer.", jsonrpcCode: null };
}

export function rpcError(err) {
  return { code: typeof err.jsonrpcCode === "number" ? err.jsonrpcCode : -32000, message: err.message, data: { reason: err.code } };
}
