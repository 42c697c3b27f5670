/*
 * The thread's one websocket (docs/websocket-protocol.md): connects with ?after=<lastSeq>,
 * applies events in sequence order (gaps → "replay"; duplicates ignored), reconnects with
 * exponential backoff, and matches replies to requests by `rid`.
 */
import { toast } from "./toasts.js";
import { els, snapshot, thread } from "./thread_state.js";

export const CAPS = ["interactiveToolUi"];
let lastSeq = Number(snapshot.lastSeq) || 0;
let capabilities = CAPS.slice();
let hooks = { applyEvent: function () {}, onRole: function () {}, onAccessLost: function () {} };
const listeners = {};

/** Listen to an event kind or frame type; returns the unsubscribe function. */
export function on(kind, fn) {
  (listeners[kind] = listeners[kind] || []).push(fn);
  return function () {
    listeners[kind] = (listeners[kind] || []).filter(function (f) {
      return f !== fn;
    });
  };
}

function emit(kind, ...args) {
  (listeners[kind] || []).slice().forEach(function (fn) {
    try {
      fn.apply(null, args);
    } catch (e) {
      console.error("Atrium: a '" + kind + "' listener failed", e);
    }
  });
}

export function socketStatus() {
  return { lastSeq: lastSeq, connected: connected, capabilities: capabilities.slice() };
}

let replayPending = false;
let replayCounter = 0;
let replayRetry = null;
// Why the server is about to close the socket (a `reply` with no request of ours, sent just
// before close 4403): the page says it plainly instead of a raw error.
const ENDING_CODES = ["membership_removed", "session_ended", "forbidden"];
let endNotice = null;

function handleEvent(frame) {
  if (typeof frame.seq !== "number") return;
  if (frame.seq <= lastSeq) return; // already applied
  if (frame.seq > lastSeq + 1) {
    requestReplay();
    return;
  }
  lastSeq = frame.seq;
  hooks.applyEvent(frame.kind, frame.data, true);
  emit(frame.kind, frame.data, frame);
}

function requestReplay() {
  if (replayPending) return;
  replayPending = true;
  replayCounter += 1;
  sendRaw({ type: "replay", after: lastSeq, rid: "replay-" + replayCounter });
}

/** A refused `replay` (rate-limited): ask again once a token is back. */
function onReplayRefused(frame) {
  replayPending = false;
  const details = (frame.error && frame.error.details) || {};
  const wait = typeof details.retryAfter === "number" ? details.retryAfter : 5;
  clearTimeout(replayRetry);
  replayRetry = setTimeout(requestReplay, Math.max(250, wait * 1000));
}

let ws = null;
let connected = false;
let everConnected = false;
let attempt = 0;
let reconnectTimer = null;
let pingTimer = null;
let closedForGood = false;
let queue = [];
const pending = new Map();
let ridCounter = 0;
const REPLY_TIMEOUT_MS = 30000;

function wsUrl() {
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  return scheme + location.host + "/ws/threads/" + encodeURIComponent(thread.id) + "/?caps=" + CAPS.join(",") + "&after=" + lastSeq;
}

function setConn(state, text) {
  els.conn.dataset.state = state;
  els.conn.querySelector(".conn-text").textContent = text;
  // "ended": the page shows why in place of the composer (thread_page.js), not up here.
  const showBanner = state === "reconnecting" || state === "offline";
  els.banner.hidden = !showBanner;
  els.banner.classList.toggle("banner-error", state === "offline");
  els.banner.querySelector(".banner-text").textContent = state === "offline" ? text : "Reconnecting…";
  els.banner.querySelector(".spinner").hidden = state === "offline";
}

function connect() {
  if (closedForGood) return;
  clearTimeout(reconnectTimer);
  reconnectTimer = null;
  if (ws) return;
  if (!everConnected) setConn("connecting", "Connecting…");
  let sock;
  try {
    sock = new WebSocket(wsUrl());
  } catch (e) {
    scheduleReconnect();
    return;
  }
  ws = sock;
  sock.onmessage = function (event) {
    if (sock !== ws) return;
    let frame;
    try {
      frame = JSON.parse(event.data);
    } catch (e) {
      return;
    }
    handleFrame(frame);
  };
  sock.onclose = function (event) {
    if (sock !== ws) return;
    ws = null;
    onDisconnected(event.code);
  };
}

function onDisconnected(code) {
  const wasConnected = connected;
  connected = false;
  replayPending = false;
  clearInterval(pingTimer);
  pending.forEach(function (p, rid) {
    if (p.sent) {
      clearTimeout(p.timer);
      pending.delete(rid);
      p.reject(new Error("The connection was lost before the server answered."));
    }
  });
  if (wasConnected) emit("close", { code: code });
  if (code === 4403 || code === 4404) {
    closedForGood = true;
    clearTimeout(replayRetry);
    const notice = endNotice || { code: code === 4404 ? "not_found" : "forbidden", message: "" };
    setConn("ended", notice.code === "session_ended" ? "Signed out" : "No access");
    hooks.onAccessLost(notice.code, notice.message);
    return;
  }
  scheduleReconnect();
}

function scheduleReconnect() {
  const delay = Math.min(15000, 500 * Math.pow(2, attempt)) * (0.8 + Math.random() * 0.4);
  attempt += 1;
  if (everConnected || attempt > 1) setConn("reconnecting", "Reconnecting…");
  clearTimeout(reconnectTimer);
  reconnectTimer = setTimeout(connect, delay);
}

function reconnectNow() {
  if (!ws && !closedForGood) {
    attempt = 0;
    connect();
  }
}

function handleFrame(frame) {
  if (!frame || typeof frame !== "object") return;
  switch (frame.type) {
    case "hello":
      if (typeof frame.maxMessageBytes === "number" && frame.maxMessageBytes > 0) maxMessageBytes = frame.maxMessageBytes;
      connected = true;
      everConnected = true;
      attempt = 0;
      if (Array.isArray(frame.capabilities)) capabilities = frame.capabilities.slice();
      if (frame.role && frame.role !== thread.role) hooks.onRole(frame.role);
      endNotice = null;
      setConn("live", "Live");
      flushQueue();
      clearInterval(pingTimer);
      pingTimer = setInterval(function () {
        sendRaw({ type: "ping" });
      }, 25000);
      emit("hello", frame);
      emit("open", frame);
      break;
    case "event":
      handleEvent(frame);
      break;
    case "replayed":
      replayPending = false;
      emit("replayed", frame);
      break;
    case "role":
      // The server re-roled this socket (an owner or admin changed the membership).
      if (frame.role && frame.role !== thread.role) hooks.onRole(frame.role);
      emit("role", frame);
      break;
    case "reply":
    case "pong":
      if (frame.type === "reply" && typeof frame.rid === "string" && frame.rid.indexOf("replay-") === 0) {
        if (frame.ok === false) onReplayRefused(frame);
        break;
      }
      if (frame.type === "reply" && frame.ok === false && frame.error && ENDING_CODES.indexOf(frame.error.code) >= 0) {
        endNotice = frame.error; // the close that follows shows it
      }
      const waiting = frame.rid !== undefined && frame.rid !== null ? pending.get(frame.rid) : null;
      if (waiting) {
        pending.delete(frame.rid);
        clearTimeout(waiting.timer);
        waiting.resolve(frame);
      } else if (frame.type === "reply" && frame.ok === false && frame.error && frame.error !== endNotice) {
        toast(frame.error.message || "The server refused that.", "error");
      }
      emit(frame.type, frame);
      break;
    default:
      emit(frame.type, frame);
  }
}

// The server's limit (hello.maxMessageBytes); until the first hello, its default.
let maxMessageBytes = 1024 * 1024;

function encodedSize(frame) {
  let text;
  try {
    text = JSON.stringify(frame);
  } catch (e) {
    return Infinity;
  }
  // UTF-8 is at most 3 bytes per UTF-16 unit: count exactly only when it may matter.
  return text.length * 3 <= maxMessageBytes ? text.length : new TextEncoder().encode(text).length;
}

function formatSize(bytes) {
  return bytes >= 1024 * 1024 ? (bytes / (1024 * 1024)).toFixed(1) + " MB" : Math.ceil(bytes / 1024) + " KB";
}

function sendRaw(frame) {
  if (ws && connected && ws.readyState === WebSocket.OPEN) {
    ws.send(JSON.stringify(frame));
    if (frame.rid && pending.has(frame.rid)) pending.get(frame.rid).sent = true;
    return true;
  }
  if (frame.type !== "ping" && frame.type !== "replay") queue.push(frame);
  return false;
}

function flushQueue() {
  const frames = queue;
  queue = [];
  frames.forEach(function (frame) {
    if (!frame.rid || pending.has(frame.rid)) sendRaw(frame);
  });
}

/** Send a client message; resolves with the server's `reply` frame (ok or not). */
/** Send an action; resolves with its reply. `opts.timeoutMs` lets a long wait (a view's
 *  tools/call waiting for an approval) outlast the default. */
export function send(msg, opts) {
  const timeoutMs = (opts && opts.timeoutMs) || REPLY_TIMEOUT_MS;
  return new Promise(function (resolve, reject) {
    if (!msg || typeof msg.type !== "string") {
      reject(new Error("Messages need a 'type'."));
      return;
    }
    ridCounter += 1;
    const rid = "c" + ridCounter;
    const frame = Object.assign({}, msg, { rid: rid });
    const size = encodedSize(frame);
    if (size > maxMessageBytes) {
      // Refused here, with an answer: the server would refuse it anyway, and a frame past
      // its transport limit would cost the whole connection (every view and the chat).
      resolve({
        type: "reply",
        rid: rid,
        ok: false,
        error: {
          code: "message_too_large",
          message: "This request is " + formatSize(size) + "; the limit is " + formatSize(maxMessageBytes) + ".",
          jsonrpcCode: -32602,
        },
      });
      return;
    }
    const entry = {
      resolve: resolve,
      reject: reject,
      sent: false,
      timer: setTimeout(function () {
        pending.delete(rid);
        reject(new Error("The server did not answer in time."));
      }, timeoutMs),
    };
    pending.set(rid, entry);
    sendRaw(frame);
  });
}

/** Connect; hooks.applyEvent(kind, data, live) renders an event, hooks.onRole(role) follows
 *  a role change, hooks.onAccessLost(code, message) says why the socket ended for good
 *  (`membership_removed`, `session_ended`, `forbidden`, `not_found`) and closes the composer. */
export function startSocket(pageHooks) {
  hooks = Object.assign(hooks, pageHooks);
  window.addEventListener("online", reconnectNow);
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") reconnectNow();
  });
  connect();
}
