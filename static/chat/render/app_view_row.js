/* The full-width row that hosts a tool call's app view (the frame is app_views/'s). */
import { mountAppView } from "../app_views/index.js";
import { h, icon } from "../dom.js";

/**
 * The full-width row that hosts a tool call's app view. The frame itself belongs to
 * static/chat/app_views/ (mountAppView); slots:
 *   [data-slot="display-modes"]  header area for display-mode buttons
 *   [data-slot="frame"]          where the frame (or the placeholder) goes
 */
export function renderAppViewRow(call) {
  const appName = (call.server && (call.server.name || call.server.slug)) || "App";
  const row = h(
    "div",
    { class: "view-row" + (call.view && call.view.prefersBorder === false ? " is-borderless" : ""), data: { toolCallId: call.id }, attrs: { role: "region", "aria-label": appName + " view" } },
    h(
      "div",
      { class: "view-header" },
      h("span", { class: "view-app-icon", attrs: { "aria-hidden": "true" } }, icon("layout")),
      h("span", { class: "view-app-name", text: appName }),
      h("span", { class: "view-tool", text: call.tool }),
      h("span", { class: "view-spacer" }),
      h("div", { class: "view-modes", data: { slot: "display-modes" } })
    ),
    h("div", { class: "view-body", data: { slot: "frame" } })
  );
  return row;
}

/** The placeholder shown when the app view cannot be mounted: the text fallback the server
 *  computed for this call (`textFallback`, chat/presenters.py). */
function renderAppViewPlaceholder(call) {
  const text = call.textFallback || "";
  const state = call.status === "running" ? "The app will appear when the tool finishes." : text ? "" : "This result has an interactive view.";
  return h(
    "div",
    { class: "view-placeholder" },
    h("div", { class: "view-placeholder-head" }, icon("app"), h("strong", { text: "Interactive view" })),
    state ? h("p", { class: "muted", text: state }) : null,
    text ? h("div", { class: "text-block", text: text }) : null
  );
}

/** Mount the app view of a row, or show the placeholder. */
export function mountAppViewRow(row, call, client) {
  const slot = row.querySelector('[data-slot="frame"]');
  try {
    mountAppView(row, call, client);
    row.classList.add("is-mounted");
    return true;
  } catch (e) {
    console.error("Atrium: mounting an app view failed", e);
  }
  slot.textContent = "";
  slot.appendChild(renderAppViewPlaceholder(call));
  return false;
}
