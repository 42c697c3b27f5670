import { h, icon } from "../dom.js";
import { formatFull, formatRelative } from "../format.js";

/** Pretty, syntax-highlighted JSON in a <pre>. */
/* The "Allowed in this thread" panel: what runs here without asking, who allowed it,
 * and (for those who may) Revoke. opts.canAct, opts.isOwner. Empty list: nothing. */
export function renderAllowances(allowances, opts) {
  const list = allowances || [];
  const panel = h("details", { class: "allowances", attrs: { "aria-label": "Allowed in this thread" } });
  panel.hidden = !list.length;
  panel.appendChild(
    h("summary", { class: "allowances-summary" },
      icon("shield"),
      h("span", { class: "allowances-title", text: "Allowed in this thread" }),
      h("span", { class: "allowances-count", text: String(list.length) }),
      h("span", { class: "allowances-hint", text: list.map(function (a) { return a.label || a.tool; }).join(", ") }),
      icon("chevron", "allowances-chevron"))
  );
  const body = h("ul", { class: "allowances-list" });
  list.forEach(function (a) {
    const who = (a.grantedBy && a.grantedBy.name) || "someone";
    const mayRevoke = opts.canAct && (a.scope === "thread" || opts.isOwner);
    body.appendChild(
      h("li", { class: "allowance", data: { allowanceId: a.id } },
        h("div", { class: "allowance-main" },
          h("code", { class: "allowance-tool", text: a.label || a.tool }),
          h("span", { class: "allowance-app", text: (a.server && a.server.name) || "" }),
          h("span", { class: "scope-badge scope-" + a.scope, text: a.scope === "thread" ? "This thread" : "Whole workspace" })),
        h("span", { class: "allowance-meta", attrs: { title: formatFull(a.createdAt) }, text: "Allowed by " + who + " · " + formatRelative(a.createdAt) }),
        mayRevoke
          ? h("button", { class: "btn btn-ghost btn-sm allowance-revoke", text: "Revoke", attrs: { type: "button", "aria-label": "Revoke " + (a.label || a.tool) }, data: { action: "revoke-allowance", allowanceId: a.id } })
          : null)
    );
  });
  panel.appendChild(body);
  return panel;
}
