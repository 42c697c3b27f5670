/* A message's attached server resources (name, server, type; "updated" after a
 * subscribed resource changed on its server). */
import { h, icon } from "../dom.js";

export function renderMessageResources(resources) {
  if (!resources || !resources.length) return null;
  return h(
    "div",
    { class: "msg-resources", attrs: { "aria-label": "Attached resources" } },
    resources.map(function (r) {
      const meta = (r.server && r.server.name ? r.server.name : "") + (r.mimeType ? " · " + r.mimeType : "");
      return h(
        "span",
        { class: "resource-chip is-attached", attrs: { title: r.uri }, data: { resourceId: r.id } },
        icon(r.binarySize !== null && r.binarySize !== undefined ? "image" : "file"),
        h("span", { class: "resource-chip-name", text: r.name || r.uri }),
        h("span", { class: "resource-chip-meta", text: meta }),
        r.updates ? h("span", { class: "tag resource-updated", text: "updated", attrs: { title: "Refreshed " + r.updates + "× since attached (" + (r.updatedAt || "") + ")" } }) : null
      );
    })
  );
}
