/*
 * The thread page (templates/chat/thread.html): renders the embedded snapshot with the
 * same functions that render live events (render/), then follows the thread's socket.
 *
 * Modules, one concern each:
 *   thread_state.js   who is reading, the page's payloads and elements
 *   socket.js         the websocket: order, replay, reconnect, request/reply
 *   client.js         window.AtriumClient, the socket as other scripts use it
 *   timeline.js       messages and tool calls in order, scrolling
 *   approvals.js      consent buttons, the allowances panel, timeline actions
 *   composer.js       the composer, slash commands, the tool picker
 *   toasts.js         notices
 *   render/           payloads (chat/presenters.py) → DOM, no network
 *   app_views/        the app view host (MCP Apps in sandboxed frames)
 */
import { appViewsDebugApi, sidePane } from "./app_views/index.js";
import { applyAllowances, applyApproval, hasAllowancesPanel, onTimelineAction } from "./approvals.js";
import { client } from "./client.js";
import { bindComposer, setComposerEnabled } from "./composer.js";
import { h, icon } from "./dom.js";
import { bindPresentationalActions } from "./render/lightbox.js";
import { initServerRequests } from "./server_requests.js";
import { initSignInRerun } from "./sign_in_rerun.js";
import { startSocket } from "./socket.js";
import { applyDelta, applyMedia, applyPartial, applyProgress, bindScrolling, placeCall, scrollToBottom, upsertCall, upsertMessage } from "./timeline.js";
import { toast } from "./toasts.js";
import { calls, canAct, els, root, snapshot, thread } from "./thread_state.js";

/** The member's own layout of this thread, as the page was served (chat/layout/). */
function readLayout() {
  try {
    const embedded = document.getElementById("thread-layout-data");
    if (embedded) return JSON.parse(embedded.textContent);
  } catch (e) {
    console.error("Atrium: the thread layout could not be read", e);
  }
  return null;
}

const ROLE_LABELS = { owner: "Owner", member: "Member", viewer: "Viewer" };

// The sidebar's account button names the role in this workspace too (templates/chat/_sidebar.html).
function setSidebarRole(text) {
  const label = document.querySelector(".user-role");
  if (label) label.textContent = text;
}

function setRole(newRole) {
  const could = canAct();
  thread.role = newRole;
  root.dataset.role = newRole;
  if (els.roleBadge) {
    els.roleBadge.textContent = ROLE_LABELS[newRole] || newRole;
    els.roleBadge.className = "role-badge role-" + newRole;
  }
  setSidebarRole(ROLE_LABELS[newRole] || newRole);
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
  if (hasAllowancesPanel()) applyAllowances();
}

// Why the socket ended for good (socket.js: onAccessLost), in words for the person reading.
function accessEndedCopy(code) {
  const subtitle = document.querySelector(".thread-header .page-subtitle");
  const workspace = subtitle ? subtitle.textContent.trim() : "";
  if (code === "membership_removed") {
    return {
      title: "You no longer have access to this workspace",
      text: (workspace ? "You were removed from " + workspace + ". " : "You were removed from this workspace. ") + "New messages, tool results and approvals no longer reach this page, and you can’t post here.",
      link: { href: "/", label: "Go to your workspaces" },
      placeholder: "You no longer have access to this workspace",
    };
  }
  if (code === "session_ended") {
    return {
      title: "Your session has ended",
      text: "You signed out, or your account changed. Sign in again to keep following this thread.",
      link: { href: "/login/?next=" + encodeURIComponent(location.pathname), label: "Sign in again" },
      placeholder: "Sign in again to post",
    };
  }
  return {
    title: "You no longer have access to this thread",
    text: "It may have been deleted, or your access to " + (workspace || "its workspace") + " changed.",
    link: { href: "/", label: "Go to your workspaces" },
    placeholder: "You no longer have access to this thread",
  };
}

function showAccessEnded(code) {
  const copy = accessEndedCopy(code);
  setComposerEnabled(false, copy.placeholder);
  if (els.roleBadge) els.roleBadge.hidden = true;
  if (code === "membership_removed") setSidebarRole("No access");
  if (els.toasts) els.toasts.replaceChildren(); // earlier notices (a role change…) are moot now
  const hint = document.getElementById("composer-hint");
  if (hint) hint.hidden = true;
  if (els.composer) els.composer.hidden = true;
  if (document.getElementById("access-ended")) return;
  const notice = h(
    "div",
    { class: "access-ended", attrs: { id: "access-ended", role: "alert", "data-reason": code } },
    h("span", { class: "access-ended-icon", attrs: { "aria-hidden": "true" } }, icon(code === "session_ended" ? "clock" : "ban")),
    h("div", { class: "access-ended-body" }, h("p", { class: "access-ended-title", text: copy.title }), h("p", { class: "access-ended-text", text: copy.text })),
    h("a", { class: "btn btn-secondary access-ended-link", text: copy.link.label, attrs: { href: copy.link.href } })
  );
  const inner = els.composer ? els.composer.parentNode : document.querySelector(".composer-inner");
  if (inner) inner.appendChild(notice);
}

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

window.AtriumClient = client;
window.AtriumAppViews = appViewsDebugApi;

bindPresentationalActions();
bindScrolling();
// The member's side pane (app_views/side_pane.js): before the rows, so that the pinned view
// opens in it at once.
sidePane.init({ client: client, layout: readLayout() });
els.list.addEventListener("click", onTimelineAction);
initSignInRerun(els.list);

(snapshot.toolCalls || []).forEach(function (call) {
  calls.set(call.id, call);
});
(snapshot.messages || []).forEach(function (msg) {
  upsertMessage(msg, false);
});
(snapshot.toolCalls || []).forEach(function (call) {
  placeCall(call);
});
applyAllowances(snapshot.allowances || []);
initServerRequests(snapshot.serverRequests || []); // a server's questions (server_requests.js)
sidePane.settled();
scrollToBottom();

bindComposer();
if (!canAct()) setComposerEnabled(false, "You have view-only access");
startSocket({
  applyEvent: applyEvent,
  onRole: setRole,
  onAccessLost: showAccessEnded,
});
