/* A tool call's approval request: who asked, with which arguments, and the consent buttons. */
import { h, icon } from "../dom.js";
import { formatRelative } from "../format.js";
import { renderJson } from "./json.js";

function requesterText(call) {
  var approval = call.approval || {};
  var kind = approval.requestedByKind || call.origin;
  if (kind === "model") return "the model";
  if (kind === "app_view") return "the " + ((call.server && call.server.name) || "app") + " view";
  if (call.requestedBy && call.requestedBy.name) return call.requestedBy.name;
  return "a member";
}

var RISK_LABELS = { read: "Read", write: "Write", destructive: "Destructive" };

export function renderApproval(call, opts) {
  var approval = call.approval;
  var box = h("div", { class: "approval approval-" + approval.status, attrs: { role: "group", "aria-label": "Approval request" }, data: { approvalId: approval.id } });
  var head = h(
    "div",
    { class: "approval-head" },
    icon(approval.status === "pending" ? "shield" : approval.status === "approved" ? "check" : "ban"),
    h("strong", { text: approval.status === "pending" ? "Approval needed" : approval.status === "approved" ? "Approved" : approval.status === "expired" ? "Approval expired" : "Rejected" }),
    approval.risk ? h("span", { class: "risk-badge risk-" + approval.risk, text: RISK_LABELS[approval.risk] || approval.risk }) : null
  );
  box.appendChild(head);
  var meta = ["Requested by " + requesterText(call)];
  if (approval.status === "pending" && approval.expiresAt) meta.push("expires " + formatRelative(approval.expiresAt));
  if (approval.status !== "pending" && approval.decidedBy) {
    meta.push((approval.status === "approved" ? "approved" : "rejected") + " by " + approval.decidedBy.name + (approval.decidedAt ? " " + formatRelative(approval.decidedAt) : ""));
  }
  box.appendChild(h("p", { class: "approval-meta", text: meta.join(" · ") }));
  if (approval.reason) box.appendChild(h("p", { class: "approval-reason", text: approval.reason }));
  if (approval.status !== "pending") return box;

  box.appendChild(h("p", { class: "approval-args-label", text: "It will run with exactly these arguments:" }));
  box.appendChild(renderJson(call.arguments || {}, "approval-args"));
  if (opts.canAct) {
    // Consent at the right scope: once, in this thread, or (owners) in the workspace.
    var offers = approval.offers || [];
    var appName = (call.server && call.server.name) || "this app";
    var ids = { approvalId: approval.id, toolCallId: call.id };
    var actions = h("div", { class: "approval-actions" });
    actions.appendChild(h("button", { class: "btn btn-primary btn-sm", text: "Approve once", attrs: { type: "button" }, data: Object.assign({ action: "approve" }, ids) }));
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
