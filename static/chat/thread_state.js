/* The thread page's state: who is reading, what the page holds, its elements. */
import { readThreadSnapshot } from "./snapshot.js";

export const root = document.getElementById("thread-app");
export const snapshot = readThreadSnapshot(root);

export const thread = {
  id: snapshot.threadId || Number(root.dataset.threadId),
  role: root.dataset.role || "viewer",
  me: { id: Number(root.dataset.userId), name: root.dataset.userName || "" },
};

export const els = {
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

export const messages = new Map(); // id → message payload
export const calls = new Map(); // id → tool call payload

export function canAct() {
  return thread.role === "owner" || thread.role === "member";
}

export function renderOpts(call) {
  return {
    canAct: canAct(),
    isOwner: thread.role === "owner",
    userId: thread.me.id,
    compact: !!(call && call.parentView),
    appName: function (callId) {
      const c = calls.get(callId);
      return c && c.server ? c.server.name || c.server.slug : null;
    },
  };
}
