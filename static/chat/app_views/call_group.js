/* A view's own tool calls, grouped under it (issue 27; docs/view-bridge.md §4d): one
 * compact, collapsible "N calls by <app>" line with the latest call's status, instead of
 * a card per call — a view that makes 15 calls for one colour change keeps its place on
 * screen. A call that needs its person (an approval card, a Connect card) stays outside
 * the group, just under the view, until it is answered; then it joins the group.
 * timeline.js asks `viewCallSlot` where each of a view's call cards goes. */
import { h, icon } from "../dom.js";

const STATUS_WORDS = {
  streaming: "starting",
  awaiting_approval: "waiting for approval",
  running: "running",
  success: "done",
  error: "failed",
  rejected: "refused",
  cancelled: "cancelled",
};

/** Whether a view's call needs its person now: it is shown outside the group. */
export function needsPerson(call) {
  return call.status === "awaiting_approval" || !!(call.error && call.error.code === "authorization_required");
}

function build(parentRow, appName) {
  const attention = h("div", { class: "view-calls-attention", attrs: { "aria-label": "Calls by this view that need you" } });
  const count = h("span", { class: "view-call-group-count" });
  const latest = h("span", { class: "view-call-group-latest" });
  const body = h("div", { class: "view-call-group-body" });
  const group = h(
    "details",
    { class: "view-call-group", attrs: { hidden: "" } },
    h("summary", { class: "view-call-group-summary" }, icon("chevron", "disclosure"), icon("wrench", "view-call-group-icon"), count, latest),
    body
  );
  const box = h("div", { class: "view-calls", data: { appName: appName }, attrs: { "aria-label": "Calls made by this view" } }, attention, group);
  parentRow.appendChild(box);
  // Cards come and go (a status update replaces a card): the summary follows. Only the
  // two card lists are watched, never the summary this writes.
  const watch = new MutationObserver(() => summarize(box));
  watch.observe(attention, { childList: true });
  watch.observe(body, { childList: true });
  return box;
}

/** A call that needed a sign-in joins the group once a later call of the same tool by
 *  this view succeeded (the retry after the sign-in, sign_in_retry.js). */
function settleSignIns(box) {
  const body = box.querySelector(".view-call-group-body");
  box.querySelectorAll(".view-calls-attention > .toolcall[data-status=error]").forEach((card) => {
    const tool = card.querySelector(".tc-tool");
    const later = Array.prototype.some.call(box.querySelectorAll(".toolcall[data-status=success]"), (other) => {
      const otherTool = other.querySelector(".tc-tool");
      return Number(other.dataset.toolCallId) > Number(card.dataset.toolCallId) && otherTool && tool && otherTool.textContent === tool.textContent;
    });
    if (!later) return;
    const next = Array.prototype.find.call(body.children, (c) => Number(c.dataset.toolCallId) > Number(card.dataset.toolCallId));
    body.insertBefore(card, next || null);
  });
}

function summarize(box) {
  settleSignIns(box);
  const group = box.querySelector(":scope > .view-call-group");
  const cards = box.querySelectorAll(".view-call-group-body > .toolcall, .view-calls-attention > .toolcall");
  const grouped = group.querySelector(".view-call-group-body").children.length;
  let newest = null;
  cards.forEach((card) => {
    if (!newest || Number(card.dataset.toolCallId) > Number(newest.dataset.toolCallId)) newest = card;
  });
  group.hidden = grouped === 0;
  const n = cards.length;
  const app = box.dataset.appName || "this app";
  group.querySelector(".view-call-group-count").textContent = n + (n === 1 ? " call by " : " calls by ") + app;
  const latest = group.querySelector(".view-call-group-latest");
  latest.textContent = "";
  if (newest) {
    const status = newest.dataset.status || "";
    const tool = newest.querySelector(".tc-tool");
    latest.className = "view-call-group-latest status-" + status;
    latest.appendChild(h("span", { class: "view-call-group-sep", text: "· latest", attrs: { "aria-hidden": "true" } }));
    latest.appendChild(h("code", { text: tool ? tool.textContent : "" }));
    latest.appendChild(h("span", { class: "view-call-group-status", text: STATUS_WORDS[status] || status }));
  }
  group.dataset.count = String(n);
  group.dataset.latestStatus = newest ? newest.dataset.status || "" : "";
}

/** The element a view's call card goes in: the attention area (it needs its person) or
 *  the group's body. `parentRow` is the view's row. */
export function viewCallSlot(parentRow, call) {
  const appName = (call.server && (call.server.name || call.server.slug)) || "";
  const box = parentRow.querySelector(":scope > .view-calls") || build(parentRow, appName);
  return needsPerson(call) ? box.querySelector(".view-calls-attention") : box.querySelector(".view-call-group-body");
}
