/*
 * Atrium chat client: one thread page, one websocket (docs/websocket-protocol.md).
 *
 * - Renders the embedded snapshot with the same functions (static/chat/render.js) that
 *   render live events, then connects with ?after=<snapshot.lastSeq> and applies events in
 *   sequence order (gaps → "replay"; duplicates ignored).
 * - Reconnects with exponential backoff and resumes with ?after=<lastSeq>.
 * - The composer: Enter sends, Shift+Enter newline, slash-command popup, tool picker.
 * - window.AtriumClient exposes the socket to other scripts (the view host):
 *     send(msg) → Promise<reply frame>   (adds a `rid`; resolves with the whole `reply`
 *                                        frame, ok or not; rejects on timeout / lost socket)
 *     on(kind, fn) → unsubscribe          (event kinds: "message", "message.delta",
 *                                        "toolcall", "toolcall.progress",
 *                                        "toolcall.input-partial", "media", "approval";
 *                                        frame types: "hello", "replayed", "reply",
 *                                        "view.response", …; "open" / "close")
 *     capabilities, role, canAct, threadId, lastSeq, connected, user,
 *     getToolCall(id), getMessage(id), toast(text, kind)
 */
(function () {
  "use strict";

  var R = window.AtriumRender;
  var root = document.getElementById("thread-app");
  if (!root || !R) return;
  var h = R.h;

  var snapshot = { threadId: Number(root.dataset.threadId), lastSeq: 0, messages: [], toolCalls: [] };
  try {
    var embedded = document.getElementById("thread-snapshot");
    if (embedded) snapshot = JSON.parse(embedded.textContent);
  } catch (e) {
    console.error("Atrium: the thread snapshot could not be read", e);
  }

  var CAPS = ["interactiveToolUi"];
  var threadId = snapshot.threadId || Number(root.dataset.threadId);
  var role = root.dataset.role || "viewer";
  var me = { id: Number(root.dataset.userId), name: root.dataset.userName || "" };
  var lastSeq = Number(snapshot.lastSeq) || 0;
  var capabilities = CAPS.slice();

  var els = {
    timeline: document.getElementById("timeline"),
    list: document.getElementById("messages"),
    banner: document.getElementById("reconnect-banner"),
    conn: document.getElementById("conn-indicator"),
    pill: document.getElementById("new-messages-pill"),
    roleBadge: document.getElementById("role-badge"),
    composer: document.getElementById("composer"),
    input: document.getElementById("composer-input"),
    sendBtn: document.getElementById("send-btn"),
    toolBtn: document.getElementById("tool-picker-btn"),
    picker: document.getElementById("tool-picker"),
    pickerSearch: document.getElementById("tool-picker-search"),
    pickerList: document.getElementById("tool-picker-list"),
    slash: document.getElementById("slash-popup"),
    slashList: document.getElementById("slash-list"),
    toasts: document.getElementById("toasts"),
  };

  // ---- state ---------------------------------------------------------------------------

  var messages = new Map(); // id → message payload
  var calls = new Map(); // id → tool call payload
  var msgEntries = new Map(); // message id → entry element
  var callCards = new Map(); // tool call id → card element
  var viewRows = new Map(); // tool call id → view row element
  var callEntries = new Map(); // tool call id → standalone entry element

  function canAct() {
    return role === "owner" || role === "member";
  }

  function renderOpts(call) {
    return {
      canAct: canAct(),
      isOwner: role === "owner",
      userId: me.id,
      compact: !!(call && call.parentView),
      appName: function (callId) {
        var c = calls.get(callId);
        return c && c.server ? c.server.name || c.server.slug : null;
      },
    };
  }

  // ---- listeners (AtriumClient.on) -----------------------------------------------------

  var listeners = {};
  function on(kind, fn) {
    (listeners[kind] = listeners[kind] || []).push(fn);
    return function () {
      listeners[kind] = (listeners[kind] || []).filter(function (f) {
        return f !== fn;
      });
    };
  }
  function emit(kind) {
    var args = Array.prototype.slice.call(arguments, 1);
    (listeners[kind] || []).slice().forEach(function (fn) {
      try {
        fn.apply(null, args);
      } catch (e) {
        console.error("Atrium: a '" + kind + "' listener failed", e);
      }
    });
  }

  // ---- scrolling -----------------------------------------------------------------------

  var pinned = true;
  function nearBottom() {
    var t = els.timeline;
    return t.scrollHeight - t.scrollTop - t.clientHeight < 80;
  }
  function scrollToBottom() {
    els.timeline.scrollTop = els.timeline.scrollHeight;
    pinned = true;
    els.pill.hidden = true;
  }
  els.timeline.addEventListener(
    "scroll",
    function () {
      pinned = nearBottom();
      if (pinned) els.pill.hidden = true;
    },
    { passive: true }
  );
  if (typeof ResizeObserver === "function") {
    new ResizeObserver(function () {
      if (pinned) els.timeline.scrollTop = els.timeline.scrollHeight;
    }).observe(els.list);
  }
  els.pill.addEventListener("click", function () {
    els.timeline.scrollTo({ top: els.timeline.scrollHeight, behavior: "smooth" });
    els.pill.hidden = true;
  });
  function noteNewContent(fromSomeoneElse) {
    if (pinned) {
      els.timeline.scrollTop = els.timeline.scrollHeight;
    } else if (fromSomeoneElse) {
      els.pill.hidden = false;
    }
  }

  // ---- timeline ordering & grouping ----------------------------------------------------

  function entryBefore(a, b) {
    var am = a.dataset.messageId;
    var bm = b.dataset.messageId;
    if (am && bm) return Number(am) < Number(bm);
    var ta = Number(a.dataset.time) || 0;
    var tb = Number(b.dataset.time) || 0;
    if (ta !== tb) return ta < tb;
    if (!!am !== !!bm) return !!am;
    return Number(a.dataset.entryId || am) < Number(b.dataset.entryId || bm);
  }

  function insertEntry(entry) {
    var node = els.list.lastElementChild;
    while (node && entryBefore(entry, node)) node = node.previousElementSibling;
    if (node) node.after(entry);
    else els.list.prepend(entry);
    regroup(entry);
    regroup(entry.nextElementSibling);
  }

  var GROUP_WINDOW_MS = 5 * 60 * 1000;
  function regroup(entry) {
    if (!entry) return;
    var prev = entry.previousElementSibling;
    var newDay = !prev || prev.dataset.day !== entry.dataset.day;
    entry.classList.toggle("has-day", newDay);
    var continuation =
      !newDay &&
      !!entry.dataset.messageId &&
      !!prev.dataset.messageId &&
      prev.dataset.authorKey === entry.dataset.authorKey &&
      Number(entry.dataset.time) - Number(prev.dataset.time) < GROUP_WINDOW_MS &&
      !prev.querySelector(".view-row");
    entry.classList.toggle("is-continuation", continuation);
  }

  function insertById(container, el, attr) {
    var id = Number(el.dataset[attr]);
    var node = container.lastElementChild;
    while (node && Number(node.dataset[attr]) > id) node = node.previousElementSibling;
    if (node) node.after(el);
    else container.prepend(el);
  }

  // ---- messages ------------------------------------------------------------------------

  function upsertMessage(msg, live) {
    if (!msg || msg.id === undefined) return;
    var isNew = !messages.has(msg.id);
    messages.set(msg.id, msg);
    var fresh = R.renderMessage(msg, renderOpts());
    var old = msgEntries.get(msg.id);
    if (old) {
      // Update in place: the tool cards and (iframe-hosting) view rows must not move.
      old.className = fresh.className;
      old.setAttribute("aria-label", fresh.getAttribute("aria-label"));
      ["authorKey", "time", "day"].forEach(function (k) {
        old.dataset[k] = fresh.dataset[k];
      });
      old.querySelector(".day-divider").replaceWith(fresh.querySelector(".day-divider"));
      old.querySelector(".msg-gutter").replaceWith(fresh.querySelector(".msg-gutter"));
      old.querySelector(".msg-header").replaceWith(fresh.querySelector(".msg-header"));
      old.querySelector(".msg-body").replaceWith(fresh.querySelector(".msg-body"));
      regroup(old);
      regroup(old.nextElementSibling);
    } else {
      msgEntries.set(msg.id, fresh);
      insertEntry(fresh);
      // Tool calls that arrived before their message move under it.
      calls.forEach(function (call) {
        if (call.messageId === msg.id && callEntries.has(call.id)) placeCall(call);
      });
    }
    if (live && isNew) {
      var mine = msg.author && msg.author.id === me.id;
      noteNewContent(!mine);
    }
  }

  function applyDelta(data) {
    var msg = messages.get(data.id);
    if (!msg || typeof data.delta !== "string") return;
    msg.text = (msg.text || "") + data.delta;
    var entry = msgEntries.get(data.id);
    if (!R.updateStreamingText(entry, msg.text)) {
      msg.status = "streaming";
      upsertMessage(msg, false);
    }
    noteNewContent(false);
  }

  // ---- tool calls ----------------------------------------------------------------------

  function standaloneEntry(call) {
    var existing = callEntries.get(call.id);
    if (existing) return existing;
    var time = new Date(call.createdAt).getTime() || Date.now();
    var label = call.origin === "app_view" ? "App action" : call.origin === "model" ? "Assistant" : (call.requestedBy && call.requestedBy.name) || "Tool call";
    var entry = h(
      "article",
      {
        class: "entry call-entry",
        data: { entryId: call.id, callId: call.id, time: time, day: R.util.dayKey(call.createdAt) },
        attrs: { "aria-label": "Tool call " + call.tool },
      },
      h("div", { class: "day-divider", attrs: { role: "separator" } }, h("span", { text: R.util.formatDay(call.createdAt) })),
      h(
        "div",
        { class: "msg" },
        h("div", { class: "msg-gutter" }, h("span", { class: "avatar avatar-tool", attrs: { "aria-hidden": "true" } }, R.icon("wrench"))),
        h(
          "div",
          { class: "msg-content" },
          h("div", { class: "msg-header" }, h("span", { class: "msg-author", text: label }), h("time", { class: "msg-time", text: R.util.formatTime(call.createdAt), attrs: { datetime: call.createdAt, title: R.util.formatFull(call.createdAt) } })),
          h("div", { class: "msg-tools" })
        )
      ),
      h("div", { class: "msg-views" })
    );
    callEntries.set(call.id, entry);
    insertEntry(entry);
    return entry;
  }

  /** Where a call's card and view row live: its message, its parent view, or its own entry. */
  function slotsFor(call) {
    var entry = call.messageId !== null && call.messageId !== undefined ? msgEntries.get(call.messageId) : null;
    if (entry) return { cards: entry.querySelector(".msg-tools"), views: entry.querySelector(".msg-views") };
    if (call.parentView !== null && call.parentView !== undefined) {
      var parentRow = viewRows.get(call.parentView);
      if (parentRow) {
        var sub = parentRow.querySelector(".view-calls");
        if (!sub) {
          sub = h("div", { class: "view-calls", attrs: { "aria-label": "Calls made by this view" } });
          parentRow.appendChild(sub);
        }
        return { cards: sub, views: sub };
      }
    }
    var own = standaloneEntry(call);
    return { cards: own.querySelector(".msg-tools"), views: own.querySelector(".msg-views") };
  }

  function replaceCard(old, card) {
    old.querySelectorAll("details[data-section]").forEach(function (d) {
      var twin = card.querySelector('details[data-section="' + d.dataset.section + '"]');
      if (twin) twin.open = d.open;
    });
    // Keep live media elements (a playing video must not restart on a status update).
    card.querySelectorAll("[data-media-key]").forEach(function (node) {
      var key = node.dataset.mediaKey;
      var twin = Array.prototype.find.call(old.querySelectorAll("[data-media-key]"), function (o) {
        return o.dataset.mediaKey === key;
      });
      if (twin && twin.dataset.mediaStatus === node.dataset.mediaStatus && twin.dataset.mediaStatus !== "staged") node.replaceWith(twin);
    });
    old.querySelectorAll(".part-text.is-expanded").forEach(function (p, i) {
      var twin = card.querySelectorAll(".part-text")[i];
      if (twin) {
        twin.classList.add("is-expanded");
        var btn = twin.querySelector(".text-expand");
        if (btn) {
          btn.textContent = "Show less";
          btn.setAttribute("aria-expanded", "true");
        }
      }
    });
    var hadFocus = old.contains(document.activeElement);
    old.replaceWith(card);
    if (hadFocus) card.focus({ preventScroll: true });
  }

  function placeCall(call) {
    var slots = slotsFor(call);
    var card = R.renderToolCall(call, renderOpts(call));
    card.tabIndex = -1;
    var old = callCards.get(call.id);
    if (old && old.parentNode === slots.cards) {
      replaceCard(old, card);
    } else {
      if (old) old.remove();
      insertById(slots.cards, card, "toolCallId");
    }
    callCards.set(call.id, card);

    // A standalone entry left empty after its call moved under a message goes away.
    callEntries.forEach(function (entry, id) {
      if (!entry.querySelector(".toolcall") && !entry.querySelector(".view-row")) {
        var next = entry.nextElementSibling;
        entry.remove();
        callEntries.delete(id);
        regroup(next);
      }
    });

    if (R.hasView(call)) {
      var row = viewRows.get(call.id);
      if (!row) {
        row = R.renderViewRow(call);
        viewRows.set(call.id, row);
        insertById(slots.views, row, "toolCallId");
        R.mountViewRow(row, call, client);
        var entry = row.closest(".entry");
        regroup(entry && entry.nextElementSibling);
      } else if (row.parentNode !== slots.views && !row.contains(slots.views)) {
        insertById(slots.views, row, "toolCallId"); // (moving reloads a frame: rare)
      } else if (!row.classList.contains("is-mounted")) {
        R.mountViewRow(row, call, client); // refresh the placeholder's text fallback
      }
      // A mounted view follows its call through client.on("toolcall") (views.js).
    }
  }

  function upsertCall(call, live) {
    if (!call || call.id === undefined) return;
    var prev = calls.get(call.id);
    if (prev && prev.partialArguments && (call.status === "running" || call.status === "streaming")) call.partialArguments = prev.partialArguments;
    calls.set(call.id, call);
    placeCall(call);
    if (live) noteNewContent(!prev && !(call.requestedBy && call.requestedBy.id === me.id));
  }

  function applyProgress(data) {
    var call = calls.get(data.id);
    if (!call) return;
    call.progress = { progress: data.progress, total: data.total, message: data.message };
    var card = callCards.get(data.id);
    if (!card || call.status !== "running") return;
    var fresh = R.renderProgress(call.progress);
    var old = card.querySelector(".tc-progress");
    if (old) old.replaceWith(fresh);
    else card.querySelector(".tc-header").after(fresh);
  }

  function applyPartial(data) {
    var call = calls.get(data.id);
    if (!call) return;
    call.partialArguments = data.arguments;
    placeCall(call);
  }

  function applyApproval(data) {
    if (!data) return;
    var call = data.toolCallId !== undefined ? calls.get(data.toolCallId) : null;
    if (!call) {
      calls.forEach(function (c) {
        if (c.approval && c.approval.id === data.id) call = c;
      });
    }
    if (!call) return;
    var merged = Object.assign({}, call.approval || {}, data);
    delete merged.toolCallId;
    call.approval = merged;
    placeCall(call);
  }

  // ---- allowances ("Allowed in this thread") -------------------------------------------

  var allowances = snapshot.allowances || [];
  var allowancesEl = null;

  function applyAllowances(list) {
    if (Array.isArray(list)) allowances = list;
    var open = allowancesEl ? allowancesEl.open : false;
    var fresh = R.renderAllowances(allowances, { canAct: canAct(), isOwner: role === "owner" });
    fresh.id = "allowances";
    fresh.open = open;
    if (allowancesEl) allowancesEl.replaceWith(fresh);
    else els.timeline.parentNode.insertBefore(fresh, els.timeline);
    allowancesEl = fresh;
    allowancesEl.addEventListener("click", onTimelineAction);
  }

  function applyMedia(data) {
    if (!data || data.id === undefined) return;
    var part = null;
    var call = calls.get(data.toolCallId);
    var parts = (call && call.result && call.result.parts) || [];
    parts.forEach(function (p) {
      if (p && p.asset && p.asset.id === data.id) {
        var asset = Object.assign({}, p.asset, data);
        delete asset.toolCallId;
        p.asset = asset;
        part = p;
      }
    });
    if (!part) return;
    els.list.querySelectorAll('[data-asset-id="' + String(data.id).replace(/[^0-9A-Za-z_-]/g, "") + '"]').forEach(function (el) {
      // Same status and not a placeholder: leave it alone (it may be playing).
      if (el.dataset.mediaStatus === (part.asset.status || "staged") && el.dataset.mediaStatus !== "staged") return;
      el.replaceWith(R.renderMedia(part, renderOpts(call)));
    });
  }

  // ---- events --------------------------------------------------------------------------

  function applyEvent(kind, data, live) {
    try {
      switch (kind) {
        case "message":
          upsertMessage(data, live);
          break;
        case "message.delta":
          applyDelta(data);
          break;
        case "toolcall":
          upsertCall(data, live);
          break;
        case "toolcall.progress":
          applyProgress(data);
          break;
        case "toolcall.input-partial":
          applyPartial(data);
          break;
        case "media":
          applyMedia(data);
          break;
        case "approval":
          applyApproval(data);
          break;
        case "allowances":
          applyAllowances(data && data.allowances);
          break;
        default:
          break; // unknown kinds are for other listeners
      }
    } catch (e) {
      console.error("Atrium: could not apply a '" + kind + "' event", e);
    }
  }

  var replayPending = false;
  function handleEvent(frame) {
    if (typeof frame.seq !== "number") return;
    if (frame.seq <= lastSeq) return; // already applied
    if (frame.seq > lastSeq + 1) {
      requestReplay();
      return;
    }
    lastSeq = frame.seq;
    applyEvent(frame.kind, frame.data, true);
    emit(frame.kind, frame.data, frame);
  }

  function requestReplay() {
    if (replayPending) return;
    replayPending = true;
    sendRaw({ type: "replay", after: lastSeq });
  }

  // ---- socket --------------------------------------------------------------------------

  var ws = null;
  var connected = false;
  var everConnected = false;
  var attempt = 0;
  var reconnectTimer = null;
  var pingTimer = null;
  var closedForGood = false;
  var queue = [];
  var pending = new Map();
  var ridCounter = 0;
  var REPLY_TIMEOUT_MS = 30000;

  function wsUrl() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    return scheme + location.host + "/ws/threads/" + encodeURIComponent(threadId) + "/?caps=" + CAPS.join(",") + "&after=" + lastSeq;
  }

  function setConn(state, text) {
    els.conn.dataset.state = state;
    els.conn.querySelector(".conn-text").textContent = text;
    var showBanner = state === "reconnecting" || state === "offline";
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
    var sock;
    try {
      sock = new WebSocket(wsUrl());
    } catch (e) {
      scheduleReconnect();
      return;
    }
    ws = sock;
    sock.onmessage = function (event) {
      if (sock !== ws) return;
      var frame;
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
    var wasConnected = connected;
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
      setConn("offline", "You no longer have access to this thread.");
      setComposerEnabled(false, "You no longer have access to this thread");
      return;
    }
    scheduleReconnect();
  }

  function scheduleReconnect() {
    var delay = Math.min(15000, 500 * Math.pow(2, attempt)) * (0.8 + Math.random() * 0.4);
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
  window.addEventListener("online", reconnectNow);
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") reconnectNow();
  });

  function handleFrame(frame) {
    if (!frame || typeof frame !== "object") return;
    switch (frame.type) {
      case "hello":
        if (typeof frame.maxMessageBytes === "number" && frame.maxMessageBytes > 0) maxMessageBytes = frame.maxMessageBytes;
        connected = true;
        everConnected = true;
        attempt = 0;
        if (Array.isArray(frame.capabilities)) capabilities = frame.capabilities.slice();
        if (frame.role && frame.role !== role) setRole(frame.role);
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
      case "reply":
      case "pong":
        var waiting = frame.rid !== undefined && frame.rid !== null ? pending.get(frame.rid) : null;
        if (waiting) {
          pending.delete(frame.rid);
          clearTimeout(waiting.timer);
          waiting.resolve(frame);
        } else if (frame.type === "reply" && frame.ok === false && frame.error) {
          toast(frame.error.message || "The server refused that.", "error");
        }
        emit(frame.type, frame);
        break;
      default:
        emit(frame.type, frame);
    }
  }

  // The server's limit (hello.maxMessageBytes); until the first hello, its default.
  var maxMessageBytes = 1024 * 1024;
  function encodedSize(frame) {
    var text;
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
    var frames = queue;
    queue = [];
    frames.forEach(function (frame) {
      if (!frame.rid || pending.has(frame.rid)) sendRaw(frame);
    });
  }

  /** Send a client message; resolves with the server's `reply` frame (ok or not). */
  /** Send an action; resolves with its reply. `opts.timeoutMs` lets a long wait (a view's
   *  tools/call waiting for an approval) outlast the default. */
  function send(msg, opts) {
    var timeoutMs = (opts && opts.timeoutMs) || REPLY_TIMEOUT_MS;
    return new Promise(function (resolve, reject) {
      if (!msg || typeof msg.type !== "string") {
        reject(new Error("Messages need a 'type'."));
        return;
      }
      ridCounter += 1;
      var rid = "c" + ridCounter;
      var frame = Object.assign({}, msg, { rid: rid });
      var size = encodedSize(frame);
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
      var entry = {
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

  // ---- toasts --------------------------------------------------------------------------

  function toast(text, kind) {
    kind = kind || "error";
    var close = h("button", { class: "icon-btn icon-btn-sm toast-close", attrs: { type: "button", "aria-label": "Dismiss" } }, R.icon("x"));
    var el = h("div", { class: "toast toast-" + kind, attrs: { role: kind === "error" ? "alert" : "status" } }, R.icon(kind === "error" ? "alert" : "info"), h("span", { class: "toast-text", text: String(text) }), close);
    var remove = function () {
      el.classList.add("is-leaving");
      setTimeout(function () {
        el.remove();
      }, 200);
    };
    close.addEventListener("click", remove);
    els.toasts.appendChild(el);
    setTimeout(remove, kind === "error" ? 7000 : 4000);
    return el;
  }

  // ---- role & composer access ----------------------------------------------------------

  var ROLE_LABELS = { owner: "Owner", member: "Member", viewer: "Viewer" };
  function setRole(newRole) {
    var could = canAct();
    role = newRole;
    root.dataset.role = role;
    if (els.roleBadge) {
      els.roleBadge.textContent = ROLE_LABELS[role] || role;
      els.roleBadge.className = "role-badge role-" + role;
    }
    if (could && !canAct()) {
      setComposerEnabled(false, "You have view-only access");
      toast("Your role changed: you now have view-only access.", "info");
    } else if (!could && canAct()) {
      toast("Your role changed: reload the page to start posting.", "info");
    }
    // Approve / Reject / Cancel / Revoke buttons follow the role.
    calls.forEach(function (call) {
      placeCall(call);
    });
    if (allowancesEl) applyAllowances();
  }

  function setComposerEnabled(enabled, placeholder) {
    if (!els.input) return;
    els.input.disabled = !enabled;
    if (placeholder) els.input.placeholder = placeholder;
    if (els.sendBtn) els.sendBtn.disabled = !enabled || !els.input.value.trim();
    if (els.toolBtn) els.toolBtn.disabled = !enabled;
    els.composer.classList.toggle("is-readonly", !enabled);
    if (!enabled) {
      closeSlash();
      closePicker(false);
    }
  }

  // ---- composer ------------------------------------------------------------------------

  var MAX_INPUT_HEIGHT = 240;
  function autogrow() {
    var input = els.input;
    input.style.height = "auto";
    var height = Math.min(input.scrollHeight, MAX_INPUT_HEIGHT);
    input.style.height = height + "px";
    input.style.overflowY = input.scrollHeight > MAX_INPUT_HEIGHT ? "auto" : "hidden";
  }

  function updateSendState() {
    if (els.sendBtn) els.sendBtn.disabled = els.input.disabled || !els.input.value.trim();
  }

  function restoreDraft(text) {
    if (!els.input.value.trim()) {
      els.input.value = text;
      autogrow();
      updateSendState();
    }
  }

  function submit() {
    if (!canAct() || els.input.disabled) return;
    var text = els.input.value.trim();
    if (!text) return;
    els.input.value = "";
    autogrow();
    updateSendState();
    closeSlash();
    scrollToBottom();
    send({ type: "message.post", text: text }).then(
      function (reply) {
        if (!reply.ok) {
          restoreDraft(text);
          toast((reply.error && reply.error.message) || "Your message was not sent.", "error");
        }
      },
      function (err) {
        restoreDraft(text);
        toast(err.message + " Your message may not have been sent.", "error");
      }
    );
  }

  // Slash commands ------------------------------------------------------------------------

  var COMMANDS = [
    { name: "/help", args: "", desc: "Show what you can do here" },
    { name: "/tools", args: "", desc: "List the tools available in this thread" },
    { name: "/call", args: "server.tool {json}", desc: "Run a tool with JSON arguments" },
  ];
  var slashItems = [];
  var slashActive = 0;

  function slashOpen() {
    return els.slash && !els.slash.hidden;
  }

  function updateSlash() {
    if (!els.slash) return;
    var m = /^(\/\S*)$/.exec(els.input.value);
    if (!m || !canAct()) {
      closeSlash();
      return;
    }
    var typed = m[1].toLowerCase();
    var matches = COMMANDS.filter(function (c) {
      return c.name.indexOf(typed) === 0;
    });
    if (!matches.length) {
      closeSlash();
      return;
    }
    var previous = slashItems[slashActive] && slashItems[slashActive].name;
    slashItems = matches;
    slashActive = Math.max(0, matches.findIndex(function (c) {
      return c.name === previous;
    }));
    renderSlash();
    els.slash.hidden = false;
    els.input.setAttribute("aria-expanded", "true");
  }

  function renderSlash() {
    els.slashList.textContent = "";
    slashItems.forEach(function (cmd, i) {
      var item = h(
        "div",
        { class: "slash-item" + (i === slashActive ? " is-active" : ""), attrs: { role: "option", id: "slash-opt-" + i, "aria-selected": String(i === slashActive) } },
        h("span", { class: "slash-name", text: cmd.name }),
        cmd.args ? h("span", { class: "slash-args", text: cmd.args }) : null,
        h("span", { class: "slash-desc", text: cmd.desc })
      );
      item.addEventListener("mousedown", function (event) {
        event.preventDefault();
      });
      item.addEventListener("click", function () {
        chooseCommand(cmd);
      });
      els.slashList.appendChild(item);
    });
    els.input.setAttribute("aria-activedescendant", "slash-opt-" + slashActive);
  }

  function closeSlash() {
    if (!els.slash) return;
    els.slash.hidden = true;
    slashItems = [];
    els.input.setAttribute("aria-expanded", "false");
    els.input.removeAttribute("aria-activedescendant");
  }

  function chooseCommand(cmd) {
    if (!cmd.args) {
      els.input.value = cmd.name;
      closeSlash();
      submit();
      return;
    }
    els.input.value = cmd.name + " ";
    closeSlash();
    autogrow();
    updateSendState();
    els.input.focus();
    if (cmd.name === "/call") openPicker();
  }

  // Tool picker ---------------------------------------------------------------------------

  var tools = null;
  var toolsLoadedAt = 0;
  var toolsState = "idle"; // idle | loading | ready | unavailable | error
  var toolsError = "";
  var pickerItems = [];
  var pickerActive = 0;

  function pickerOpen() {
    return els.picker && !els.picker.hidden;
  }

  function openPicker() {
    if (!els.picker || !canAct()) return;
    closeSlash();
    els.picker.hidden = false;
    if (els.toolBtn) els.toolBtn.setAttribute("aria-expanded", "true");
    els.pickerSearch.value = "";
    pickerActive = 0;
    loadTools();
    renderPicker();
    els.pickerSearch.focus();
  }

  function closePicker(focusInput) {
    if (!pickerOpen()) return;
    els.picker.hidden = true;
    if (els.toolBtn) els.toolBtn.setAttribute("aria-expanded", "false");
    if (focusInput && els.input) els.input.focus();
  }

  function loadTools() {
    if (toolsState === "loading") return;
    if (toolsState === "ready" && Date.now() - toolsLoadedAt < 60000) return;
    toolsState = "loading";
    send({ type: "tools.list" }).then(
      function (reply) {
        if (reply.ok) {
          tools = (reply.result && Array.isArray(reply.result.tools) && reply.result.tools) || [];
          toolsLoadedAt = Date.now();
          toolsState = "ready";
        } else if (reply.error && reply.error.code === "unknown_type") {
          toolsState = "unavailable";
        } else {
          toolsState = "error";
          toolsError = (reply.error && reply.error.message) || "The tool list could not be loaded.";
        }
        if (pickerOpen()) renderPicker();
      },
      function (err) {
        toolsState = "error";
        toolsError = err.message;
        if (pickerOpen()) renderPicker();
      }
    );
  }

  function pickerMessage(title, text) {
    els.pickerList.appendChild(h("div", { class: "picker-state" }, h("p", { class: "picker-state-title", text: title }), text ? h("p", { class: "picker-state-text", text: text }) : null));
  }

  function renderPicker() {
    var list = els.pickerList;
    list.textContent = "";
    pickerItems = [];
    if (toolsState === "loading" || toolsState === "idle") {
      list.appendChild(h("div", { class: "picker-state" }, h("span", { class: "spinner spinner-sm", attrs: { "aria-hidden": "true" } }), h("p", { class: "picker-state-text", text: "Loading tools…" })));
      return;
    }
    if (toolsState === "unavailable") {
      pickerMessage("Tool list unavailable", "You can still run a tool by typing /call server.tool {…}.");
      return;
    }
    if (toolsState === "error") {
      pickerMessage("Tool list unavailable", toolsError);
      return;
    }
    var q = els.pickerSearch.value.trim().toLowerCase();
    var matches = (tools || []).filter(function (t) {
      if (!q) return true;
      var hay = [t.name, t.title, t.description, t.server && t.server.name, t.server && t.server.slug].join(" ").toLowerCase();
      return q.split(/\s+/).every(function (w) {
        return hay.indexOf(w) >= 0;
      });
    });
    if (!tools || !tools.length) {
      pickerMessage("No tools yet", "No app is enabled for this thread. An admin can bind MCP servers to this workspace.");
      return;
    }
    if (!matches.length) {
      pickerMessage("No matching tools", "Nothing matches “" + els.pickerSearch.value.trim() + "”.");
      return;
    }
    pickerActive = Math.min(pickerActive, matches.length - 1);
    var lastServer = null;
    matches.forEach(function (tool, i) {
      var serverName = (tool.server && (tool.server.name || tool.server.slug)) || "";
      if (serverName !== lastServer) {
        list.appendChild(h("div", { class: "picker-group", text: serverName, attrs: { role: "presentation" } }));
        lastServer = serverName;
      }
      var badges = h("span", { class: "picker-badges" });
      if (tool.hasUi) badges.appendChild(h("span", { class: "tag tag-accent", text: "App" }));
      if (tool.risk && tool.risk !== "read") badges.appendChild(h("span", { class: "risk-badge risk-" + tool.risk, text: tool.risk === "destructive" ? "Destructive" : "Write" }));
      var item = h(
        "div",
        { class: "picker-item" + (i === pickerActive ? " is-active" : ""), attrs: { role: "option", id: "picker-opt-" + i, "aria-selected": String(i === pickerActive) } },
        h("span", { class: "picker-item-icon", attrs: { "aria-hidden": "true" } }, R.icon(tool.hasUi ? "layout" : "wrench")),
        h(
          "span",
          { class: "picker-item-text" },
          h("span", { class: "picker-item-title" }, h("span", { text: tool.title || tool.name }), badges),
          h("code", { class: "picker-item-name", text: ((tool.server && tool.server.slug) || "") + "." + tool.name }),
          tool.description ? h("span", { class: "picker-item-desc", text: tool.description }) : null
        )
      );
      item.addEventListener("mousedown", function (event) {
        event.preventDefault();
      });
      item.addEventListener("click", function () {
        chooseTool(tool);
      });
      item.addEventListener("mousemove", function () {
        if (pickerActive !== i) {
          pickerActive = i;
          syncPickerActive();
        }
      });
      pickerItems.push({ tool: tool, el: item });
      list.appendChild(item);
    });
    syncPickerActive();
  }

  function syncPickerActive() {
    pickerItems.forEach(function (it, i) {
      it.el.classList.toggle("is-active", i === pickerActive);
      it.el.setAttribute("aria-selected", String(i === pickerActive));
    });
    var active = pickerItems[pickerActive];
    if (active) {
      els.pickerSearch.setAttribute("aria-activedescendant", active.el.id);
      active.el.scrollIntoView({ block: "nearest" });
    } else {
      els.pickerSearch.removeAttribute("aria-activedescendant");
    }
  }

  /** A JSON value for a schema: defaults, then enums, then an empty value of its type. */
  function skeleton(schema, depth) {
    schema = schema && typeof schema === "object" ? schema : {};
    depth = depth || 0;
    if (schema["default"] !== undefined) return schema["default"];
    if (schema["const"] !== undefined) return schema["const"];
    if (Array.isArray(schema["enum"]) && schema["enum"].length) return schema["enum"][0];
    var type = Array.isArray(schema.type)
      ? schema.type.filter(function (t) {
          return t !== "null";
        })[0]
      : schema.type;
    if (!type && schema.properties) type = "object";
    switch (type) {
      case "string":
        return "";
      case "integer":
      case "number":
        return typeof schema.minimum === "number" ? schema.minimum : 0;
      case "boolean":
        return false;
      case "array":
        return [];
      case "object":
        var out = {};
        if (depth < 4) {
          (Array.isArray(schema.required) ? schema.required : []).forEach(function (key) {
            out[key] = skeleton((schema.properties || {})[key], depth + 1);
          });
        }
        return out;
      default:
        return null;
    }
  }

  function chooseTool(tool) {
    var args = skeleton(tool.inputSchema || { type: "object" });
    if (!args || typeof args !== "object" || Array.isArray(args)) args = {};
    var text = "/call " + ((tool.server && tool.server.slug) || "") + "." + tool.name + " " + JSON.stringify(args);
    els.input.value = text;
    closePicker(true);
    autogrow();
    updateSendState();
    // Put the caret in the first empty string value, else at the end.
    var start = text.indexOf("{");
    var hole = text.indexOf('""', start);
    var caret = hole >= 0 ? hole + 1 : text.length;
    els.input.setSelectionRange(caret, caret);
  }

  function bindComposer() {
    if (!els.input || els.input.disabled || !els.sendBtn) return;
    els.composer.addEventListener("submit", function (event) {
      event.preventDefault();
      submit();
    });
    els.input.addEventListener("input", function () {
      autogrow();
      updateSendState();
      updateSlash();
    });
    els.input.addEventListener("keydown", function (event) {
      if (event.isComposing || event.keyCode === 229) return;
      if (slashOpen() && slashItems.length) {
        if (event.key === "ArrowDown" || event.key === "ArrowUp") {
          event.preventDefault();
          var n = slashItems.length;
          slashActive = (slashActive + (event.key === "ArrowDown" ? 1 : n - 1)) % n;
          renderSlash();
          return;
        }
        if ((event.key === "Enter" && !event.shiftKey) || event.key === "Tab") {
          event.preventDefault();
          chooseCommand(slashItems[slashActive]);
          return;
        }
        if (event.key === "Escape") {
          event.preventDefault();
          closeSlash();
          return;
        }
      }
      if (event.key === "Enter" && !event.shiftKey && !event.altKey && !event.ctrlKey && !event.metaKey) {
        event.preventDefault();
        submit();
      }
    });
    els.input.addEventListener("blur", function () {
      setTimeout(closeSlash, 120);
    });

    if (els.toolBtn) {
      els.toolBtn.addEventListener("click", function () {
        if (pickerOpen()) closePicker(true);
        else openPicker();
      });
    }
    els.pickerSearch.addEventListener("input", function () {
      pickerActive = 0;
      renderPicker();
    });
    els.pickerSearch.addEventListener("keydown", function (event) {
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        var n = pickerItems.length;
        if (!n) return;
        pickerActive = (pickerActive + (event.key === "ArrowDown" ? 1 : n - 1)) % n;
        syncPickerActive();
      } else if (event.key === "Enter") {
        event.preventDefault();
        if (pickerItems[pickerActive]) chooseTool(pickerItems[pickerActive].tool);
      } else if (event.key === "Escape") {
        event.preventDefault();
        closePicker(true);
      }
    });
    document.addEventListener("mousedown", function (event) {
      if (pickerOpen() && !els.picker.contains(event.target) && !(els.toolBtn && els.toolBtn.contains(event.target))) closePicker(false);
    });
    autogrow();
    updateSendState();
  }

  // ---- actions inside the timeline (approvals, cancel) ---------------------------------

  function idValue(raw) {
    return /^\d+$/.test(raw) ? Number(raw) : raw;
  }

  var DECISIONS = { approve: 1, allow_thread: 1, allow_workspace: 1, reject: 1 };

  function onTimelineAction(event) {
    var btn = event.target instanceof Element ? event.target.closest("button[data-action]") : null;
    if (!btn) return;
    var action = btn.dataset.action;
    var msg = null;
    if (DECISIONS[action]) {
      msg = { type: "approval.decide", approvalId: idValue(btn.dataset.approvalId), decision: action };
    } else if (action === "revoke-allowance") {
      msg = { type: "allowance.revoke", allowanceId: idValue(btn.dataset.allowanceId) };
    } else if (action === "cancel-tool") {
      msg = { type: "tool.cancel", toolCallId: idValue(btn.dataset.toolCallId) };
    } else if (action === "cancel-turn") {
      msg = { type: "turn.cancel" };
    } else if (action === "retry-tool") {
      // After connecting a server: the same call again, as the viewer (a new, audited call).
      var failed = calls.get(idValue(btn.dataset.toolCallId));
      if (!failed) return;
      msg = { type: "tool.call", server: failed.server.slug, tool: failed.tool, arguments: failed.arguments || {} };
    } else {
      return;
    }
    if (!canAct()) return;
    var group = btn.parentNode.querySelectorAll("button");
    group.forEach(function (b) {
      b.disabled = true;
    });
    btn.classList.add("is-busy");
    send(msg).then(
      function (reply) {
        if (!reply.ok) {
          toast((reply.error && reply.error.message) || "That didn't work.", "error");
          group.forEach(function (b) {
            b.disabled = false;
          });
          btn.classList.remove("is-busy");
        }
      },
      function (err) {
        toast(err.message, "error");
        group.forEach(function (b) {
          b.disabled = false;
        });
        btn.classList.remove("is-busy");
      }
    );
  }
  els.list.addEventListener("click", onTimelineAction);

  // ---- start ---------------------------------------------------------------------------

  var client = {
    send: send,
    on: on,
    toast: toast,
    getToolCall: function (id) {
      return calls.get(id);
    },
    getMessage: function (id) {
      return messages.get(id);
    },
    user: me,
  };
  Object.defineProperties(client, {
    capabilities: { get: function () { return capabilities.slice(); }, enumerable: true },
    role: { get: function () { return role; }, enumerable: true },
    canAct: { get: canAct, enumerable: true },
    threadId: { get: function () { return threadId; }, enumerable: true },
    lastSeq: { get: function () { return lastSeq; }, enumerable: true },
    connected: { get: function () { return connected; }, enumerable: true },
  });
  window.AtriumClient = client;

  (snapshot.toolCalls || []).forEach(function (call) {
    calls.set(call.id, call);
  });
  (snapshot.messages || []).forEach(function (msg) {
    upsertMessage(msg, false);
  });
  (snapshot.toolCalls || []).forEach(function (call) {
    placeCall(call);
  });
  applyAllowances(allowances);
  scrollToBottom();

  bindComposer();
  if (!canAct()) setComposerEnabled(false, "You have view-only access");
  connect();
})();
