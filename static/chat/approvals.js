/* Approvals and allowances: the consent buttons in the timeline, the "Allowed in this
 * thread" panel, and the other timeline actions (cancel, retry) that go to the server. */
import { renderAllowances } from "./render/allowances.js";
import { send } from "./socket.js";
import { placeCall } from "./timeline.js";
import { toast } from "./toasts.js";
import { calls, canAct, els, snapshot, thread } from "./thread_state.js";

export function applyApproval(data) {
  if (!data) return;
  let call = data.toolCallId !== undefined ? calls.get(data.toolCallId) : null;
  if (!call) {
    calls.forEach(function (c) {
      if (c.approval && c.approval.id === data.id) call = c;
    });
  }
  if (!call) return;
  const merged = Object.assign({}, call.approval || {}, data);
  delete merged.toolCallId;
  call.approval = merged;
  placeCall(call);
}

let allowances = snapshot.allowances || [];
let allowancesEl = null;

export function applyAllowances(list) {
  if (Array.isArray(list)) allowances = list;
  const open = allowancesEl ? allowancesEl.open : false;
  const fresh = renderAllowances(allowances, { canAct: canAct(), isOwner: thread.role === "owner" });
  fresh.id = "allowances";
  fresh.open = open;
  if (allowancesEl) allowancesEl.replaceWith(fresh);
  else els.timeline.parentNode.insertBefore(fresh, els.timeline);
  allowancesEl = fresh;
  allowancesEl.addEventListener("click", onTimelineAction);
}

function idValue(raw) {
  return /^\d+$/.test(raw) ? Number(raw) : raw;
}

const DECISIONS = { approve: 1, allow_thread: 1, allow_workspace: 1, allow_app: 1, reject: 1 };

export function onTimelineAction(event) {
  const btn = event.target instanceof Element ? event.target.closest("button[data-action]") : null;
  if (!btn) return;
  const action = btn.dataset.action;
  let msg = null;
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
    const failed = calls.get(idValue(btn.dataset.toolCallId));
    if (!failed) return;
    msg = { type: "tool.call", server: failed.server.slug, tool: failed.tool, arguments: failed.arguments || {} };
  } else {
    return;
  }
  if (!canAct()) return;
  const group = btn.parentNode.querySelectorAll("button");
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

export function hasAllowancesPanel() {
  return allowancesEl !== null;
}
