/*
 * The timeline: messages and tool calls in order, grouped by author and day, with their
 * tool call cards and app view rows; scrolling that follows new content.
 */
import { h, icon } from "./dom.js";
import { dayKey, formatDay, formatFull, formatTime } from "./format.js";
import { mountAppViewRow, renderAppViewRow } from "./render/app_view_row.js";
import { renderDeleteConfirm, renderMessage, updateStreamingText } from "./render/message.js";
import { renderMedia } from "./render/parts.js";
import { hasAppView, renderProgress, renderToolCall } from "./render/tool_call.js";
import { client } from "./client.js";
import { toast } from "./toasts.js";
import { calls, els, messages, renderOpts, thread } from "./thread_state.js";
import { viewCallSlot } from "./app_views/call_group.js";

const msgEntries = new Map(); // message id → entry element
const callCards = new Map(); // tool call id → card element
const appViewRows = new Map(); // tool call id → view row element
const callEntries = new Map(); // tool call id → standalone entry element

// ---- scrolling -----------------------------------------------------------------------

let pinned = true;

function nearBottom() {
  const t = els.timeline;
  return t.scrollHeight - t.scrollTop - t.clientHeight < 80;
}

export function scrollToBottom() {
  els.timeline.scrollTop = els.timeline.scrollHeight;
  pinned = true;
  els.pill.hidden = true;
}

function noteNewContent(fromSomeoneElse) {
  if (pinned) {
    els.timeline.scrollTop = els.timeline.scrollHeight;
  } else if (fromSomeoneElse) {
    els.pill.hidden = false;
  }
}

export function bindScrolling() {
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
}

// ---- ordering & grouping -------------------------------------------------------------

function entryBefore(a, b) {
  const am = a.dataset.messageId;
  const bm = b.dataset.messageId;
  if (am && bm) return Number(am) < Number(bm);
  const ta = Number(a.dataset.time) || 0;
  const tb = Number(b.dataset.time) || 0;
  if (ta !== tb) return ta < tb;
  if (!!am !== !!bm) return !!am;
  return Number(a.dataset.entryId || am) < Number(b.dataset.entryId || bm);
}

function insertEntry(entry) {
  let node = els.list.lastElementChild;
  while (node && entryBefore(entry, node)) node = node.previousElementSibling;
  if (node) node.after(entry);
  else els.list.prepend(entry);
  regroup(entry);
  regroup(entry.nextElementSibling);
}

const GROUP_WINDOW_MS = 5 * 60 * 1000;

function regroup(entry) {
  if (!entry) return;
  const prev = entry.previousElementSibling;
  const newDay = !prev || prev.dataset.day !== entry.dataset.day;
  entry.classList.toggle("has-day", newDay);
  const continuation =
    !newDay &&
    !!entry.dataset.messageId &&
    !!prev.dataset.messageId &&
    prev.dataset.authorKey === entry.dataset.authorKey &&
    Number(entry.dataset.time) - Number(prev.dataset.time) < GROUP_WINDOW_MS &&
    !prev.querySelector(".view-row");
  entry.classList.toggle("is-continuation", continuation);
}

function insertById(container, el, attr) {
  const id = Number(el.dataset[attr]);
  let node = container.lastElementChild;
  while (node && Number(node.dataset[attr]) > id) node = node.previousElementSibling;
  if (node) node.after(el);
  else container.prepend(el);
}

// ---- messages ------------------------------------------------------------------------

export function upsertMessage(msg, live) {
  if (!msg || msg.id === undefined) return;
  const isNew = !messages.has(msg.id);
  messages.set(msg.id, msg);
  const fresh = renderMessage(msg, renderOpts());
  const old = msgEntries.get(msg.id);
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
    const actions = old.querySelector(".msg-actions");
    if (actions && !actions.contains(document.activeElement)) actions.replaceWith(fresh.querySelector(".msg-actions"));
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
    const mine = msg.author && msg.author.id === thread.me.id;
    noteNewContent(!mine);
  }
}

export function applyDelta(data) {
  const msg = messages.get(data.id);
  if (!msg || typeof data.delta !== "string") return;
  msg.text = (msg.text || "") + data.delta;
  const entry = msgEntries.get(data.id);
  if (!updateStreamingText(entry, msg.text)) {
    msg.status = "streaming";
    upsertMessage(msg, false);
  }
  noteNewContent(false);
}

// ---- tool calls ----------------------------------------------------------------------

function standaloneEntry(call) {
  const existing = callEntries.get(call.id);
  if (existing) return existing;
  const time = new Date(call.createdAt).getTime() || Date.now();
  const label = call.origin === "app_view" ? "App action" : call.origin === "model" ? "Assistant" : (call.requestedBy && call.requestedBy.name) || "Tool call";
  const entry = h(
    "article",
    {
      class: "entry call-entry",
      data: { entryId: call.id, callId: call.id, time: time, day: dayKey(call.createdAt) },
      attrs: { "aria-label": "Tool call " + call.tool },
    },
    h("div", { class: "day-divider", attrs: { role: "separator" } }, h("span", { text: formatDay(call.createdAt) })),
    h(
      "div",
      { class: "msg" },
      h("div", { class: "msg-gutter" }, h("span", { class: "avatar avatar-tool", attrs: { "aria-hidden": "true" } }, icon("wrench"))),
      h(
        "div",
        { class: "msg-content" },
        h("div", { class: "msg-header" }, h("span", { class: "msg-author", text: label }), h("time", { class: "msg-time", text: formatTime(call.createdAt), attrs: { datetime: call.createdAt, title: formatFull(call.createdAt) } })),
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
  const entry = call.messageId !== null && call.messageId !== undefined ? msgEntries.get(call.messageId) : null;
  if (entry) return { cards: entry.querySelector(".msg-tools"), views: entry.querySelector(".msg-views") };
  if (call.parentView !== null && call.parentView !== undefined) {
    const parentRow = appViewRows.get(call.parentView);
    if (parentRow) {
      // Grouped under the view; one that needs its person stays in view (call_group.js).
      const sub = viewCallSlot(parentRow, call);
      return { cards: sub, views: sub };
    }
  }
  const own = standaloneEntry(call);
  return { cards: own.querySelector(".msg-tools"), views: own.querySelector(".msg-views") };
}

function replaceCard(old, card) {
  old.querySelectorAll("details[data-section]").forEach(function (d) {
    const twin = card.querySelector('details[data-section="' + d.dataset.section + '"]');
    if (twin) twin.open = d.open;
  });
  // Keep live media elements (a playing video must not restart on a status update).
  card.querySelectorAll("[data-media-key]").forEach(function (node) {
    const key = node.dataset.mediaKey;
    const twin = Array.prototype.find.call(old.querySelectorAll("[data-media-key]"), function (o) {
      return o.dataset.mediaKey === key;
    });
    if (twin && twin.dataset.mediaStatus === node.dataset.mediaStatus && twin.dataset.mediaStatus !== "staged") node.replaceWith(twin);
  });
  old.querySelectorAll(".part-text.is-expanded").forEach(function (p, i) {
    const twin = card.querySelectorAll(".part-text")[i];
    if (twin) {
      twin.classList.add("is-expanded");
      const btn = twin.querySelector(".text-expand");
      if (btn) {
        btn.textContent = "Show less";
        btn.setAttribute("aria-expanded", "true");
      }
    }
  });
  const hadFocus = old.contains(document.activeElement);
  old.replaceWith(card);
  if (hadFocus) card.focus({ preventScroll: true });
}

export function placeCall(call) {
  const slots = slotsFor(call);
  const card = renderToolCall(call, renderOpts(call));
  card.tabIndex = -1;
  const old = callCards.get(call.id);
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
      const next = entry.nextElementSibling;
      entry.remove();
      callEntries.delete(id);
      regroup(next);
    }
  });

  if (hasAppView(call)) {
    let row = appViewRows.get(call.id);
    if (!row) {
      row = renderAppViewRow(call);
      appViewRows.set(call.id, row);
      insertById(slots.views, row, "toolCallId");
      mountAppViewRow(row, call, client);
      const entry = row.closest(".entry");
      regroup(entry && entry.nextElementSibling);
    } else if (row.parentNode !== slots.views && !row.contains(slots.views)) {
      insertById(slots.views, row, "toolCallId"); // (moving reloads a frame: rare)
    } else if (!row.classList.contains("is-mounted")) {
      mountAppViewRow(row, call, client); // refresh the placeholder's text fallback
    }
    // A mounted view follows its call through client.on("toolcall") (views.js).
  }
}

export function upsertCall(call, live) {
  if (!call || call.id === undefined) return;
  const prev = calls.get(call.id);
  if (prev && prev.partialArguments && (call.status === "running" || call.status === "streaming")) call.partialArguments = prev.partialArguments;
  calls.set(call.id, call);
  placeCall(call);
  if (live) noteNewContent(!prev && !(call.requestedBy && call.requestedBy.id === thread.me.id));
}

export function applyProgress(data) {
  const call = calls.get(data.id);
  if (!call) return;
  call.progress = { progress: data.progress, total: data.total, message: data.message };
  const card = callCards.get(data.id);
  if (!card || call.status !== "running") return;
  const fresh = renderProgress(call.progress);
  const old = card.querySelector(".tc-progress");
  if (old) old.replaceWith(fresh);
  else card.querySelector(".tc-header").after(fresh);
}

export function applyPartial(data) {
  const call = calls.get(data.id);
  if (!call) return;
  call.partialArguments = data.arguments;
  placeCall(call);
}

export function applyMedia(data) {
  if (!data || data.id === undefined) return;
  let part = null;
  const call = calls.get(data.toolCallId);
  const parts = (call && call.result && call.result.parts) || [];
  parts.forEach(function (p) {
    if (p && p.asset && p.asset.id === data.id) {
      const asset = Object.assign({}, p.asset, data);
      delete asset.toolCallId;
      p.asset = asset;
      part = p;
    }
  });
  if (!part) return;
  els.list.querySelectorAll('[data-asset-id="' + String(data.id).replace(/[^0-9A-Za-z_-]/g, "") + '"]').forEach(function (el) {
    // Same status and not a placeholder: leave it alone (it may be playing).
    if (el.dataset.mediaStatus === (part.asset.status || "staged") && el.dataset.mediaStatus !== "staged") return;
    el.replaceWith(renderMedia(part, renderOpts(call)));
  });
}

// ---- deleting a message (issue 26, docs/files.md "Deleting a message") ---------------

/** A `message.deleted` event: the message leaves the timeline (live, and in a replay). */
export function removeMessage(id) {
  const entry = msgEntries.get(id);
  messages.delete(id);
  if (!entry) return;
  // Focus inside it (or on its confirm, whose buttons were disabled while deleting) goes to
  // the composer, not to the page's body.
  const hadFocus = entry.contains(document.activeElement) || entry.dataset.refocus === "1";
  // (The server keeps messages that started a call; should one be here, its card stays.)
  calls.forEach(function (call) {
    if (call.messageId === id) {
      call.messageId = null;
      placeCall(call);
    }
  });
  const next = entry.nextElementSibling;
  entry.remove();
  msgEntries.delete(id);
  regroup(next);
  if (hadFocus && els.input && !els.input.disabled) els.input.focus({ preventScroll: true });
}

function closeDeleteConfirm(entry, refocus) {
  const box = entry && entry.querySelector(".msg-delete-confirm");
  if (!box) return;
  box.remove();
  entry.classList.remove("is-confirming-delete");
  const button = entry.querySelector(".msg-delete");
  if (refocus && button) button.focus();
}

function openDeleteConfirm(entry, msg) {
  els.list.querySelectorAll(".is-confirming-delete").forEach(function (other) {
    if (other !== entry) closeDeleteConfirm(other, false);
  });
  let box = entry.querySelector(".msg-delete-confirm");
  if (!box) {
    box = renderDeleteConfirm(msg);
    entry.querySelector(".msg-body").after(box);
    entry.classList.add("is-confirming-delete");
  }
  box.querySelector('[data-action="delete-message-cancel"]').focus();
}

function confirmDelete(entry, id) {
  const box = entry.querySelector(".msg-delete-confirm");
  const buttons = box ? box.querySelectorAll("button") : [];
  if (box && box.contains(document.activeElement)) entry.dataset.refocus = "1";
  buttons.forEach(function (b) {
    b.disabled = true;
  });
  const status = box && box.querySelector(".msg-delete-confirm-status");
  if (status) status.textContent = "Deleting…";
  const fail = function (text) {
    const refocus = entry.dataset.refocus === "1";
    delete entry.dataset.refocus;
    buttons.forEach(function (b) {
      b.disabled = false;
    });
    if (refocus) box.querySelector('[data-action="delete-message-cancel"]').focus();
    if (status) status.textContent = "";
    toast(text || "The message could not be deleted.", "error");
  };
  client.send({ type: "message.delete", messageId: id }).then(
    function (reply) {
      if (reply.ok) removeMessage(id); // every page (this one too) also gets message.deleted
      else if (reply.error && reply.error.code === "already_deleted") removeMessage(id);
      else fail(reply.error && reply.error.message);
    },
    function (err) {
      fail(err && err.message);
    }
  );
}

function onMessageAction(event) {
  const btn = event.target instanceof Element ? event.target.closest("button[data-action]") : null;
  if (!btn) return;
  const entry = btn.closest(".msg-entry");
  const id = entry ? Number(entry.dataset.messageId) : NaN;
  const msg = messages.get(id);
  if (!msg) return;
  if (btn.dataset.action === "delete-message") openDeleteConfirm(entry, msg);
  else if (btn.dataset.action === "delete-message-cancel") closeDeleteConfirm(entry, true);
  else if (btn.dataset.action === "delete-message-confirm") confirmDelete(entry, id);
}

els.list.addEventListener("click", onMessageAction);
els.list.addEventListener("keydown", function (event) {
  if (event.key !== "Escape" || !(event.target instanceof Element)) return;
  const box = event.target.closest(".msg-delete-confirm");
  if (!box) return;
  event.preventDefault();
  closeDeleteConfirm(box.closest(".msg-entry"), true);
});
client.on("message.deleted", function (data) {
  if (data && data.id !== undefined) removeMessage(data.id);
});
