/* A tool call's approval request: who asked, with which arguments, and the consent buttons. */
import { h, icon } from "../dom.js";
import { formatRelative } from "../format.js";
import { renderJson } from "./json.js";

function requesterText(call) {
  const approval = call.approval || {};
  const kind = approval.requestedByKind || call.origin;
  if (kind === "model") return "the model";
  if (kind === "app_view") return "the " + ((call.server && call.server.name) || "app") + " view";
  if (call.requestedBy && call.requestedBy.name) return call.requestedBy.name;
  return "a member";
}

const RISK_LABELS = { read: "Read", write: "Write", destructive: "Destructive" };

// The risk badge: what the server says (or, for a tool that declares nothing, that it is
// "not declared safe — treated as destructive"; the label comes from bindings.policy).
function riskBadge(approval) {
  if (!approval.risk) return null;
  const undeclared = approval.riskSource === "default" && approval.risk === "destructive";
  return h("span", {
    class: "risk-badge risk-" + approval.risk + (undeclared ? " risk-undeclared" : ""),
    text: approval.riskLabel || RISK_LABELS[approval.risk] || approval.risk,
    attrs: undeclared ? { title: "The server does not say whether this tool only reads or changes something, so Atrium treats it as destructive." } : {},
  });
}

function timesAsked(approval) {
  const asks = approval.asks || 1;
  return asks > 1 ? "asked " + asks + " times" : null;
}

export function renderApproval(call, opts) {
  const approval = call.approval;
  const box = h("div", { class: "approval approval-" + approval.status, attrs: { role: "group", "aria-label": "Approval request" }, data: { approvalId: approval.id } });
  const head = h(
    "div",
    { class: "approval-head" },
    icon(approval.status === "pending" ? "shield" : approval.status === "approved" ? "check" : "ban"),
    h("strong", { text: approval.status === "pending" ? "Approval needed" : approval.status === "approved" ? "Approved" : approval.status === "expired" ? "Approval expired" : "Rejected" }),
    riskBadge(approval)
  );
  box.appendChild(head);
  const meta = ["Requested by " + requesterText(call)];
  const asked = timesAsked(approval);
  if (asked) meta.push(asked);
  if (approval.status === "pending" && approval.expiresAt) meta.push("expires " + formatRelative(approval.expiresAt));
  if (approval.status !== "pending" && approval.decidedBy) {
    meta.push((approval.status === "approved" ? "approved" : "rejected") + " by " + approval.decidedBy.name + (approval.decidedAt ? " " + formatRelative(approval.decidedAt) : ""));
  }
  box.appendChild(h("p", { class: "approval-meta", text: meta.join(" · ") }));
  if (approval.reason) box.appendChild(h("p", { class: "approval-reason", text: approval.reason }));
  if (approval.status !== "pending") return box;

  box.appendChild(h("p", { class: "approval-args-label", text: "It will run with exactly these arguments:" }));
  box.appendChild(renderJson(call.arguments || {}, "approval-args"));
  // A call that spends a member's own sign-in: only that member may approve it.
  const only = approval.onlyApprover;
  const othersOnly = !!(only && only.id !== opts.userId);
  if (opts.canAct && othersOnly) {
    const ids0 = { approvalId: approval.id, toolCallId: call.id };
    box.appendChild(h("p", { class: "approval-owner-only" }, icon("user"), only.message));
    const rejectOnly = h("div", { class: "approval-actions" });
    rejectOnly.appendChild(h("button", { class: "btn btn-danger-soft btn-sm", text: "Reject", attrs: { type: "button" }, data: Object.assign({ action: "reject" }, ids0) }));
    box.appendChild(rejectOnly);
  } else if (opts.canAct) {
    // Consent at the right scope: once, in this thread, or (owners) in the workspace.
    const offers = approval.offers || [];
    const appName = (call.server && call.server.name) || "this app";
    const ids = { approvalId: approval.id, toolCallId: call.id };
    const actions = h("div", { class: "approval-actions" });
    actions.appendChild(h("button", { class: "btn btn-primary btn-sm", text: "Approve once", attrs: { type: "button" }, data: Object.assign({ action: "approve" }, ids) }));
    if (offers.indexOf("app") !== -1) {
      // Tools only the app's view can call: consent to the app once (docs/consent.md).
      actions.appendChild(
        h("button", { class: "btn btn-secondary btn-sm approval-allow-app", attrs: { type: "button", title: "Calls of " + appName + "'s own app-only tools from its view run without asking in this thread until someone revokes it" }, data: Object.assign({ action: "allow_app" }, ids) },
          "Allow " + appName + " in this thread")
      );
    }
    if (offers.indexOf("thread") !== -1) {
      actions.appendChild(
        h("button", { class: "btn btn-secondary btn-sm", attrs: { type: "button", title: "Calls of " + call.tool + " in this thread run without asking until someone revokes it" }, data: Object.assign({ action: "allow_thread" }, ids) },
          "Allow ", h("code", { text: call.tool }), " in this thread")
      );
    }
    if (opts.isOwner && offers.indexOf("workspace") !== -1) {
      actions.appendChild(
        h("button", { class: "btn btn-secondary btn-sm", attrs: { type: "button", title: "Calls of " + call.tool + " run without asking in every thread of this workspace until someone revokes it" }, data: Object.assign({ action: "allow_workspace" }, ids) },
          "Always allow ", h("code", { text: call.tool }), " for " + appName + " in this workspace")
      );
    }
    actions.appendChild(h("button", { class: "btn btn-danger-soft btn-sm", text: "Reject", attrs: { type: "button" }, data: Object.assign({ action: "reject" }, ids) }));
    box.appendChild(actions);
    if (!offers.length) {
      box.appendChild(h("p", { class: "approval-note" }, icon("info"), "Every call of this tool needs its own approval."));
    }
  } else {
    box.appendChild(h("p", { class: "approval-readonly" }, icon("info"), "Only owners and members can approve or reject this call."));
  }
  return box;
}
