/* Sign-in on demand, for a person's and the model's calls: a call refused because its
 * server needs a sign-in shows a Connect card (render/tool_call.js). When the person signs
 * in from that card — in the tab it opened, whose result page announces it on a
 * BroadcastChannel (oauth_done.js) — the call runs again as theirs, once: the latest
 * refused call of each tool and arguments on the servers they connected from this page,
 * if it was refused in the last few minutes. A new call, decided and audited like any.
 * (A view's refused call is sent again by the view's host: app_views/sign_in_retry.js.) */
import { send } from "./socket.js";
import { calls, canAct, thread } from "./thread_state.js";

const CHANNEL = "atrium-oauth";
const RECENT_MS = 10 * 60 * 1000;
const connecting = new Set(); // server slugs whose Connect form was sent from this page
const rerun = new Set(); // calls already run again

function refusedForSignIn(call) {
  return !!(call && call.error && call.error.code === "authorization_required");
}

function mine(call) {
  const details = call.error.details || {};
  return !details.shared && (!call.requestedBy || String(call.requestedBy.id) === String(thread.me.id));
}

function recent(call) {
  const when = Date.parse(call.finishedAt || call.createdAt || "");
  return Number.isFinite(when) && Date.now() - when < RECENT_MS;
}

/** The calls to run again once `slugs` are connected: newest first, one per tool+arguments. */
export function callsToRerun(all, slugs) {
  const seen = new Set();
  const chosen = [];
  const newestFirst = Array.from(all).sort(function (a, b) {
    return b.id - a.id;
  });
  newestFirst.forEach(function (call) {
    if (!refusedForSignIn(call) || call.origin === "app_view" || call.parentView) return;
    if (!call.server || !slugs.has(call.server.slug) || rerun.has(call.id)) return;
    if (!mine(call) || !recent(call)) return;
    const key = call.server.slug + "\u0000" + call.tool + "\u0000" + JSON.stringify(call.arguments || {});
    if (seen.has(key)) return;
    seen.add(key);
    chosen.push(call);
  });
  return chosen;
}

function onConnected() {
  if (!canAct() || connecting.size === 0) return;
  const slugs = new Set(connecting);
  connecting.clear();
  callsToRerun(calls.values(), slugs).forEach(function (call) {
    rerun.add(call.id);
    send({ type: "tool.call", server: call.server.slug, tool: call.tool, arguments: call.arguments || {} });
  });
}

export function initSignInRerun(timeline) {
  if (typeof BroadcastChannel === "undefined") return;
  timeline.addEventListener("submit", function (event) {
    const form = event.target instanceof Element ? event.target.closest(".connect-form") : null;
    const card = form ? form.closest("[data-connect-server]") : null;
    if (card && card.dataset.connectServer) connecting.add(card.dataset.connectServer);
  });
  const channel = new BroadcastChannel(CHANNEL);
  channel.onmessage = function (event) {
    if (event.data && event.data.type === "connected") onConnected();
  };
}
