/* A tool call → its card: status, origin, approval, arguments, result parts, errors. */
import { h, icon } from "../dom.js";
import { formatLatency } from "../format.js";
import { renderApproval } from "./approval.js";
import { renderJson } from "./json.js";
import { renderPart } from "./parts.js";

const STATUS = {
  running: { label: "Running", cls: "running" },
  streaming: { label: "Receiving input", cls: "running" },
  success: { label: "Done", cls: "success", icon: "check" },
  error: { label: "Failed", cls: "error", icon: "x" },
  awaiting_approval: { label: "Awaiting approval", cls: "awaiting", icon: "shield" },
  rejected: { label: "Rejected", cls: "rejected", icon: "ban" },
  cancelled: { label: "Cancelled", cls: "cancelled", icon: "ban" },
};

const ORIGINS = {
  model: { label: "Model", icon: "sparkle" },
  user: { label: "User", icon: "user" },
  app_view: { label: "App view", icon: "app" },
};

const ERROR_TITLES = {
  timeout: "The tool took too long to answer",
  tool_timeout: "The tool took too long to answer",
  cancelled: "The call was cancelled",
  server_unavailable: "The server is unavailable",
  server_error: "The server reported an error",
  connection_failed: "Couldn't connect to the server",
  connection_error: "Couldn't connect to the server",
  unknown_tool: "This tool doesn't exist (any more)",
  tool_not_found: "This tool doesn't exist (any more)",
  invalid_arguments: "The arguments don't match what the tool expects",
  invalid_params: "The arguments don't match what the tool expects",
  forbidden: "Not allowed",
  denied: "Blocked by policy",
  policy_denied: "Blocked by policy",
  rejected: "The call was rejected",
  approval_rejected: "The call was rejected",
  expired: "The approval request expired",
  approval_expired: "The approval request expired",
  server_not_found: "There is no such server",
  internal_error: "Something went wrong on our side",
  task_expired: "The server forgot this task before its result was fetched",
  task_unsupported: "The server doesn't run this tool as a task",
  task_failed: "The tool's task failed",
};

/* A call run as an MCP task (chat.calls.mcp_tasks): the server's status, stored with the
   call so a reload shows the same line. */
const TASK_LABELS = {
  submitted: "Starting…",
  working: "Working…",
  input_required: "Waiting for input",
  completed: "Completed",
  failed: "Failed",
  cancelled: "Cancelled by the server",
  expired: "Expired",
};

function renderTaskStatus(call) {
  const task = call.task;
  const open = call.status === "running";
  let label = TASK_LABELS[task.status] || String(task.status);
  if (task.status === "cancelled" && call.status === "cancelled") label = "Cancel confirmed by the server";
  const text = ["Server task", label];
  if (task.statusMessage && (open || task.status === "cancelled")) text.push(task.statusMessage);
  return h(
    "div",
    { class: "tc-task task-" + task.status, data: { taskStatus: task.status }, attrs: { role: "status" } },
    open ? h("span", { class: "spinner spinner-xs", attrs: { "aria-hidden": "true" } }) : icon("info"),
    h("span", { class: "progress-label", text: text.join(" · ") })
  );
}

function isToolError(call) {
  return !!(call.result && call.result.meta && call.result.meta.isError);
}

function renderStatusPill(call) {
  const st = STATUS[call.status] || { label: String(call.status || "Unknown"), cls: "unknown" };
  let label = st.label;
  let cls = st.cls;
  if (call.status === "success" && isToolError(call)) {
    label = "Tool error";
    cls = "error";
  }
  const pill = h("span", { class: "status-pill status-" + cls, data: { status: call.status } });
  if (call.status === "running" && call.task) label = call.task.status === "input_required" ? "Waiting for input" : "Working…";
  if (call.status === "running") pill.appendChild(h("span", { class: "spinner spinner-xs", attrs: { "aria-hidden": "true" } }));
  else if (st.icon) pill.appendChild(icon(cls === "error" ? "x" : st.icon));
  pill.appendChild(document.createTextNode(label));
  return pill;
}

export function renderProgress(progress) {
  progress = progress || {};
  const total = typeof progress.total === "number" && progress.total > 0 ? progress.total : null;
  const value = typeof progress.progress === "number" ? progress.progress : null;
  const pct = total !== null && value !== null ? Math.max(0, Math.min(1, value / total)) : null;
  const bar = h("div", { class: "progress-bar" });
  const track = h("div", {
    class: "progress-track" + (pct === null ? " is-indeterminate" : ""),
    attrs: {
      role: "progressbar",
      "aria-valuemin": pct === null ? null : "0",
      "aria-valuemax": pct === null ? null : "100",
      "aria-valuenow": pct === null ? null : String(Math.round(pct * 100)),
      "aria-label": "Progress",
    },
  }, bar);
  if (pct !== null) bar.style.width = (pct * 100).toFixed(1) + "%";
  const label = [];
  if (progress.message) label.push(String(progress.message));
  if (pct !== null) label.push(value + " / " + total);
  else if (value !== null) label.push(String(value));
  return h("div", { class: "tc-progress" }, track, label.length ? h("span", { class: "progress-label", text: label.join(" · ") }) : null);
}

function renderToolError(error) {
  error = error || {};
  const title = ERROR_TITLES[error.code] || "The tool call failed";
  const message = error.message && error.message !== title ? error.message : "";
  // A cancellation was someone's choice, not a failure: a quiet note, not an alarm.
  const cancelled = error.code === "cancelled";
  return h(
    "div",
    { class: "callout " + (cancelled ? "callout-muted" : "callout-error"), attrs: { role: cancelled ? "note" : "alert" } },
    icon(cancelled ? "ban" : "alert"),
    h("div", { class: "callout-body" }, h("p", { class: "callout-title", text: title }), message ? h("p", { class: "callout-text", text: message }) : null, error.code ? h("code", { class: "callout-code", text: error.code }) : null)
  );
}

/** "Connect <server> to continue": the server needs a sign-in (OAuth) that the person
 *  the call ran for (or, for a shared grant, an administrator) has not given. The button
 *  posts to the app's connect view in a new tab (the provider's consent page); once
 *  connected, the call runs again by itself (sign_in_rerun.js), "Run again" by hand. */
function renderConnectCard(call, opts) {
  const details = (call.error && call.error.details) || {};
  const server = (call.server && (call.server.name || call.server.slug)) || details.server || "the server";
  const slug = (call.server && call.server.slug) || details.slug || "";
  const mine = !details.shared && (!call.requestedBy || String(call.requestedBy.id) === String(opts.userId));
  const tokenInput = document.querySelector('input[name="csrfmiddlewaretoken"]');
  let text;
  if (details.shared) text = "An administrator needs to connect " + server + " for everyone before this tool can run.";
  else if (mine) text = "This tool runs with your own " + server + " account. Connect it: the call runs again once you have signed in.";
  else text = "This tool runs with the account of " + ((call.requestedBy && call.requestedBy.name) || "the person who asked") + ", who has not connected " + server + " yet.";
  let actions = null;
  if (mine && opts.canAct && slug && tokenInput) {
    actions = h(
      "div",
      { class: "connect-actions" },
      h(
        "form",
        { class: "connect-form", attrs: { method: "post", action: "/oauth/connect/" + encodeURIComponent(slug) + "/", target: "_blank" } },
        h("input", { attrs: { type: "hidden", name: "csrfmiddlewaretoken", value: tokenInput.value } }),
        h("button", { class: "btn btn-primary btn-sm", attrs: { type: "submit" } }, icon("shield"), "Connect " + server)
      ),
      call.origin !== "app_view" ? h("button", { class: "btn btn-ghost btn-sm", text: "Run again", attrs: { type: "button" }, data: { action: "retry-tool", toolCallId: call.id } }) : null
    );
  }
  return h(
    "div",
    { class: "callout callout-connect", attrs: { role: "status" }, data: { connectServer: slug } },
    icon("shield"),
    h("div", { class: "callout-body" }, h("p", { class: "callout-title", text: "Connect " + server + " to continue" }), h("p", { class: "callout-text", text: text }), actions)
  );
}

/** Whether a tool call shows an app view (a `ui` part, or a view declared by its tool).
 *  A call a view made itself answers that view; it never opens a second one. */
export function hasAppView(call) {
  if (call.parentView) return false;
  if (call.view) return true;
  const parts = (call.result && call.result.parts) || [];
  return parts.some(function (p) {
    return p && p.type === "ui";
  });
}

/**
 * A tool call → <section class="toolcall">.
 * opts.canAct: show Approve/Reject/Cancel buttons (they carry data-action attributes;
 * the page script handles the clicks). opts.compact: a smaller card (calls made by a view).
 */
export function renderToolCall(call, opts) {
  opts = opts || {};
  const statusCls = (STATUS[call.status] || { cls: "unknown" }).cls;
  const card = h("section", {
    class: "toolcall status-" + statusCls + (isToolError(call) ? " is-tool-error" : "") + (opts.compact ? " is-compact" : ""),
    data: { toolCallId: call.id, status: call.status },
    attrs: { "aria-label": "Tool call " + ((call.server && call.server.name) || "") + " " + call.tool },
  });
  const origin = ORIGINS[call.origin] || { label: String(call.origin || ""), icon: "info" };
  let originLabel = origin.label;
  if (call.origin === "user" && call.requestedBy && call.requestedBy.name) originLabel = call.requestedBy.name;
  const header = h(
    "header",
    { class: "tc-header" },
    h("span", { class: "tc-icon", attrs: { "aria-hidden": "true" } }, icon("wrench")),
    h("span", { class: "tc-title" }, h("span", { class: "tc-server", text: (call.server && (call.server.name || call.server.slug)) || "server" }), h("span", { class: "tc-sep", text: "/", attrs: { "aria-hidden": "true" } }), h("code", { class: "tc-tool", text: call.tool })),
    h("span", { class: "chip chip-origin origin-" + (call.origin || "unknown"), attrs: { title: "Called by: " + origin.label } }, icon(origin.icon), originLabel),
    h("span", { class: "tc-spacer" }),
    call.latencyMs !== null && call.latencyMs !== undefined ? h("span", { class: "tc-latency", text: formatLatency(call.latencyMs), attrs: { title: "Latency" } }) : null,
    (call.status === "running" || call.status === "streaming") && opts.canAct
      ? h("button", { class: "btn btn-ghost btn-xs tc-cancel", attrs: { type: "button", title: "Cancel this call" }, data: { action: "cancel-tool", toolCallId: call.id } }, icon("stop"), "Cancel")
      : null,
    renderStatusPill(call)
  );
  card.appendChild(header);

  if (call.status === "running" && (call.progress || opts.showIndeterminate)) card.appendChild(renderProgress(call.progress));
  if (call.task) card.appendChild(renderTaskStatus(call));

  if (call.approval && (call.status === "awaiting_approval" || call.approval.status !== "pending")) {
    card.appendChild(renderApproval(call, opts));
  }

  const body = h("div", { class: "tc-body" });
  const args = call.partialArguments && (call.status === "running" || call.status === "streaming") && !Object.keys(call.arguments || {}).length ? call.partialArguments : call.arguments;
  const argCount = args && typeof args === "object" ? Object.keys(args).length : 0;
  const hidesArgs = call.approval && call.approval.status === "pending";
  if (!hidesArgs && argCount > 0) {
    body.appendChild(
      h(
        "details",
        { class: "tc-args", data: { section: "arguments" } },
        h("summary", null, icon("chevron", "disclosure"), "Arguments", h("span", { class: "tc-args-count", text: argCount ? argCount + (argCount === 1 ? " field" : " fields") : "none" })),
        renderJson(args || {})
      )
    );
  }

  const parts = (call.result && call.result.parts) || [];
  const shown = parts.filter(function (p) {
    return p && p.type !== "ui" && !(Array.isArray(p.audience) && p.audience.length === 1 && p.audience[0] === "assistant");
  });
  if (shown.length) {
    const result = h("div", { class: "tc-result" + (isToolError(call) ? " is-error" : "") });
    shown.forEach(function (part) {
      const el = renderPart(part, opts);
      if (el) result.appendChild(el);
    });
    if ((hasAppView(call) || opts.compact) && !isToolError(call)) {
      // The view shows this result (its own, or the view that made the call): the text
      // version stays one click away instead of filling the thread.
      body.appendChild(
        h(
          "details",
          { class: "tc-args tc-fallback", data: { section: "fallback" } },
          h("summary", null, icon("chevron", "disclosure"), "Result as text", h("span", { class: "tc-args-count", text: shown.length === 1 ? "1 part" : shown.length + " parts" })),
          result
        )
      );
    } else {
      body.appendChild(result);
    }
  } else if (call.status === "success" && !hasAppView(call)) {
    body.appendChild(h("p", { class: "tc-empty", text: "The tool returned no content." }));
  }
  if (call.status === "success" && call.result && call.result.structured && !shown.length && !hasAppView(call)) {
    body.appendChild(renderJson(call.result.structured, "tc-structured"));
  }

  const decided = call.approval && call.approval.status !== "pending";
  if (call.error && call.error.code === "authorization_required") {
    body.appendChild(renderConnectCard(call, opts));
  } else if (call.error && (call.status === "error" || call.status === "cancelled" || (call.status === "rejected" && !decided))) {
    body.appendChild(renderToolError(call.error));
  }
  card.appendChild(body);
  return card;
}
