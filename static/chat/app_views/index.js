/*
 * The app view host: renders MCP Apps (and legacy MCP-UI / Apps SDK views) in the thread.
 *
 *   mountAppView(container, toolCallPayload, client)
 *   unmountAppView(container) → Promise (after ui/resource-teardown, ≤ 3 s)
 *
 * Design (DESIGN §7-§8, docs/view-bridge.md, docs/sandbox.md):
 * - Lazy: a view opens only when its row comes within ~600 px of the visible timeline
 *   (lazy_open.js).
 * - `view.open` over the thread socket returns a capability token and the sandbox proxy
 *   URL on the view's server's own sandbox origin. The outer frame is
 *   `allow-scripts allow-same-origin allow-forms` on that origin; the proxy puts the app
 *   into the spec's inner frame on the same origin. No popups and no modal dialogs: links
 *   go through `ui/open-link`, which the server checks. The host trusts neither proxy nor
 *   view: the server decides. An AppView and its collaborators: app_view.js.
 * - One window `message` listener, attached at load (before any frame exists). A message
 *   is accepted only when `event.source` is one of our frames' windows AND its origin is
 *   that frame's sandbox origin. `event.source === window` is never trusted.
 * - S3 handshake: proxy-ready → the host fetches the immutable document URL and answers
 *   sandbox-resource-ready. JSON-RPC 2.0 with the view afterwards; nothing is sent to the
 *   view before `ui/notifications/initialized` (early requests are answered).
 * - Every app request goes to the server (`view.request`, host_bridge.js); the server
 *   decides and audits. Only presentational bits are local: ui/initialize, size changes,
 *   display modes (which the server still arbitrates for app requests), the Apps SDK modal.
 * - Legacy MCP-UI messages are translated into the same requests (compat_mcp_ui.js); Apps
 *   SDK widgets get `window.openai` from the shim the proxy injects
 *   (templates/sandbox/openai-shim.js; requestModal in compat_openai.js).
 */
import { AppView } from "./app_view.js";
import { currentTheme } from "./host_context.js";
import { forCall, liveAppViews, viewForContainer } from "./registry.js";
import { dataOf } from "./rpc.js";
import { sidePane } from "./side_pane.js";

export { sidePane };

window.addEventListener("message", (event) => {
  if (!event.source) return;
  for (const view of liveAppViews) {
    if (view.receive(event)) return;
  }
});

const subscribedClients = new WeakSet();

/** A mounted app view follows its call through the thread client's events. */
function subscribe(client) {
  if (!client || typeof client.on !== "function") return;
  if (subscribedClients.has(client)) return;
  subscribedClients.add(client);
  client.on("toolcall", (arg) => {
    const call = dataOf(arg);
    if (call && call.id !== undefined) forCall(call.id, (v) => v.onCall(call));
  });
  client.on("toolcall.input-partial", (arg) => {
    const data = dataOf(arg);
    if (data && data.id !== undefined) forCall(data.id, (v) => v.onPartial(data));
  });
}

let themeTimer = null;
let lastTheme = currentTheme();
function themeChanged() {
  clearTimeout(themeTimer);
  themeTimer = setTimeout(() => {
    lastTheme = currentTheme();
    liveAppViews.forEach((v) => v.contextChanged());
  }, 30);
}
document.addEventListener("atrium:themechange", themeChanged);
if (typeof MutationObserver === "function") {
  new MutationObserver(() => {
    if (currentTheme() !== lastTheme) themeChanged();
  }).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
}

document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape") return;
  const fullscreen = liveAppViews.find((v) => v.modes.mode === "fullscreen");
  if (fullscreen) {
    fullscreen.setMode("inline", "user");
    event.preventDefault();
  }
});

// Rows the chat removed: tear their views down (checked lazily, not per mutation).
let sweepTimer = null;
function sweep() {
  sweepTimer = null;
  liveAppViews.slice().forEach((v) => {
    if (!v.modal && !v.container.isConnected) v.destroy("removed");
  });
}
if (typeof MutationObserver === "function") {
  const startSweeping = () => {
    new MutationObserver(() => {
      if (!sweepTimer) sweepTimer = setTimeout(sweep, 1000);
    }).observe(document.body, { childList: true, subtree: true });
  };
  if (document.body) startSweeping();
  else document.addEventListener("DOMContentLoaded", startSweeping);
}

window.addEventListener("pagehide", () => liveAppViews.forEach((v) => v.pageClosing()));

// ---- public API -------------------------------------------------------------------------------

export function mountAppView(container, call, client) {
  if (!container || !call || call.id === undefined) throw new Error("mountAppView needs a container and a tool call.");
  if (!client || typeof client.send !== "function") throw new Error("mountAppView needs the thread client.");
  if (call.parentView !== undefined && call.parentView !== null) {
    // A call a view made for itself: its result goes back to that view (tools/call),
    // it does not open a second view of its own.
    container.hidden = true;
    container.classList.add("view-child-call");
    return null;
  }
  const existing = viewForContainer(container);
  if (existing && existing.id === call.id) {
    existing.onCall(call);
    return existing;
  }
  if (existing) existing.destroy("replaced");
  subscribe(client);
  const view = new AppView(container, call, client);
  liveAppViews.push(view);
  sidePane.adopt(view); // the member's pinned view opens in the side pane
  view.start();
  return view;
}

export function unmountAppView(container) {
  const view = viewForContainer(container);
  return view ? view.destroy("unmount") : Promise.resolve();
}

/** For tests and debugging (window.AtriumAppViews): the live app views, read-only. */
export const appViewsDebugApi = {
  unmount: unmountAppView,
  list: () => liveAppViews.map((v) => v.summary()),
  pane: () => sidePane.summary(),
  setDisplayMode(toolCallId, mode) {
    let result = null;
    forCall(toolCallId, (v) => {
      if (!v.modal) result = v.setMode(mode, "user");
    });
    return result;
  },
};
