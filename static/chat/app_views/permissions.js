/* Permissions an app view's resource asks for and its binding has not granted yet. */
import { h, icon } from "../dom.js";
import { request } from "./rpc.js";

function listWords(words) {
  if (words.length < 2) return words.join("");
  return words.slice(0, -1).join(", ") + " and " + words[words.length - 1];
}

/** The prompt for permissions the view's resource declares and its binding has not
 *  granted: owners answer it (Allow for this app / Not now), others see it waits.
 *  `onGranted`: the view is remounted (its frame's `allow` changes). */
export function permissionPrompt(asked, { id, appName, client, onGranted }) {
  if (!asked || !Array.isArray(asked.missing) || !asked.missing.length) return null;
  const key = "atrium:permission-later:" + id + ":" + asked.missing.join(",");
  try {
    if (window.sessionStorage.getItem(key)) return null;
  } catch (e) {
    /* storage may be unavailable */
  }
  const labels = Array.isArray(asked.labels) && asked.labels.length ? asked.labels : asked.missing;
  const text = appName + " asks to use " + listWords(labels.map(String));
  const box = h("div", { class: "view-permission", attrs: { role: "group", "aria-label": "Permission request" } });
  box.appendChild(icon("shield", "view-icon"));
  if (!asked.canGrant) {
    box.appendChild(h("span", { class: "view-permission-text" }, h("strong", { text: text }), h("span", { class: "view-permission-note", text: " · waiting for a workspace owner to allow it" })));
    return box;
  }
  const status = h("span", { class: "view-permission-note", attrs: { role: "status" } });
  const allow = h("button", { class: "btn btn-primary btn-sm", text: "Allow for this app", attrs: { type: "button" } });
  const later = h("button", { class: "btn btn-sm", text: "Not now", attrs: { type: "button" } });
  allow.addEventListener("click", function () {
    allow.disabled = true;
    later.disabled = true;
    status.textContent = "Allowing…";
    request(client, { type: "view.grant_permissions", toolCallId: id, permissions: asked.missing }).then(
      () => onGranted(),
      function (err) {
        allow.disabled = false;
        later.disabled = false;
        status.textContent = (err && err.message) || "It could not be allowed.";
      }
    );
  });
  later.addEventListener("click", function () {
    try {
      window.sessionStorage.setItem(key, "1");
    } catch (e) {
      /* the prompt just goes away for now */
    }
    if (box.parentNode) box.parentNode.removeChild(box);
  });
  box.appendChild(h("span", { class: "view-permission-text" }, h("strong", { text: text }), status));
  box.appendChild(h("span", { class: "view-permission-actions" }, allow, later));
  return box;
}

