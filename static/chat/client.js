/*
 * window.AtriumClient: the thread socket as other scripts (and tests) use it.
 *   send(msg, opts) → Promise<reply frame>  (adds a `rid`; resolves with the whole `reply`
 *                                          frame, ok or not; rejects on timeout / lost socket)
 *   on(kind, fn) → unsubscribe              (event kinds: "message", "message.delta",
 *                                          "toolcall", "toolcall.progress",
 *                                          "toolcall.input-partial", "media", "approval";
 *                                          frame types: "hello", "replayed", "reply", …;
 *                                          "open" / "close")
 *   capabilities, role, canAct, threadId, lastSeq, connected, user,
 *   getToolCall(id), getMessage(id), toast(text, kind)
 */
import { on, send, socketStatus } from "./socket.js";
import { toast } from "./toasts.js";
import { calls, canAct, messages, thread } from "./thread_state.js";

export const client = {
  send: send,
  on: on,
  toast: toast,
  getToolCall: function (id) {
    return calls.get(id);
  },
  getMessage: function (id) {
    return messages.get(id);
  },
  user: thread.me,
};
Object.defineProperties(client, {
  capabilities: { get: () => socketStatus().capabilities, enumerable: true },
  role: { get: () => thread.role, enumerable: true },
  canAct: { get: canAct, enumerable: true },
  threadId: { get: () => thread.id, enumerable: true },
  lastSeq: { get: () => socketStatus().lastSeq, enumerable: true },
  connected: { get: () => socketStatus().connected, enumerable: true },
});
