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
 *   view: the server decides (app_view.js).
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
import { AppView, frameMethods } from "./app_view.js";
import { openaiCompatMethods } from "./compat_openai.js";
import { mcpUiCompatMethods } from "./compat_mcp_ui.js";
import { displayModeMethods } from "./display_modes.js";
import { bridgeMethods } from "./host_bridge.js";
import { hostCardMethods } from "./host_cards.js";
import { currentTheme, hostContextMethods } from "./host_context.js";
import { lifecycleMethods } from "./lifecycle.js";
import { permissionMethods } from "./permissions.js";
import { forCall, liveAppViews, viewForContainer } from "./registry.js";
import { dataOf } from "./rpc.js";

// One AppView, its behaviour grouped by concern in the modules above.
Object.assign(AppView.prototype, frameMethods, bridgeMethods, hostContextMethods, lifecycleMethods, permissionMethods, displayModeMethods, openaiCompatMethods, mcpUiCompatMethods, hostCardMethods);

window.addEventListener("message", function (event) {
  var source = event.source;
  if (!source) return;
  for (var i = 0; i < liveAppViews.length; i++) {
    var v = liveAppViews[i];
    if (v.frame && source === v.frame.contentWindow) {
      if (event.origin !== v.origin) return;
      v.onMessage(event.data);
      return;
    }
  }
});

const subscribedClients = new WeakSet();

/** A mounted app view follows its call through the thread client's events. */
function subscribe(client) {
  if (!client || typeof client.on !== "function") return;
  if (subscribedClients.has(client)) return;
  subscribedClients.add(client);
  client.on("toolcall", function (arg) {
    var call = dataOf(arg);
    if (call && call.id !== undefined) {
      forCall(call.id, function (v) {
        v.onCall(call);
      });
    }
  });
  client.on("toolcall.input-partial", function (arg) {
    var data = dataOf(arg);
    if (data && data.id !== undefined) {
      forCall(data.id, function (v) {
        v.onPartial(data);
      });
    }
  });
}

var themeTimer = null;
var lastTheme = currentTheme();
function themeChanged() {
  clearTimeout(themeTimer);
  themeTimer = setTimeout(function () {
    lastTheme = currentTheme();
    liveAppViews.forEach(function (v) {
      v.contextChanged();
    });
  }, 30);
}
document.addEventListener("atrium:themechange", themeChanged);
if (typeof MutationObserver === "function") {
  new MutationObserver(function () {
    if (currentTheme() !== lastTheme) themeChanged();
  }).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
}

document.addEventListener("keydown", function (event) {
  if (event.key !== "Escape") return;
  for (var i = 0; i < liveAppViews.length; i++) {
    if (liveAppViews[i].mode === "fullscreen") {
      liveAppViews[i].setMode("inline", "user");
      event.preventDefault();
      return;
    }
  }
});

// Rows the chat removed: tear their views down (checked lazily, not per mutation).
var sweepTimer = null;
function sweep() {
  sweepTimer = null;
  liveAppViews.slice().forEach(function (v) {
    if (!v.modal && !v.container.isConnected) v.destroy("removed");
  });
}
if (typeof MutationObserver === "function") {
  var startSweeping = function () {
    new MutationObserver(function () {
      if (!sweepTimer) sweepTimer = setTimeout(sweep, 1000);
    }).observe(document.body, { childList: true, subtree: true });
  };
  if (document.body) startSweeping();
  else document.addEventListener("DOMContentLoaded", startSweeping);
}

window.addEventListener("pagehide", function () {
  liveAppViews.forEach(function (v) {
    if (v.ready && v.protocol === "mcp") v.post({ jsonrpc: "2.0", id: "atrium-host:pagehide", method: "ui/resource-teardown", params: { reason: "page closed" } });
  });
});

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
  var existing = viewForContainer(container);
  if (existing && existing.id === call.id) {
    existing.onCall(call);
    return existing;
  }
  if (existing) existing.destroy("replaced");
  subscribe(client);
  var view = new AppView(container, call, client);
  liveAppViews.push(view);
  view.start();
  return view;
}

export function unmountAppView(container) {
  var view = viewForContainer(container);
  return view ? view.destroy("unmount") : Promise.resolve();
}

/** For tests and debugging (window.AtriumAppViews): the live app views, read-only. */
export const appViewsDebugApi = {
  unmount: unmountAppView,
  list: function () {
    return liveAppViews.map(function (v) {
      return { toolCallId: v.id, phase: v.phase, ready: v.ready, protocol: v.protocol, mode: v.mode, height: v.height, flavor: v.flavor, modal: !!v.modal };
    });
  },
  setDisplayMode: function (toolCallId, mode) {
    var result = null;
    forCall(toolCallId, function (v) {
      if (!v.modal) result = v.setMode(mode, "user");
    });
    return result;
  },
};
