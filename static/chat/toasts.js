/* Short notices in the corner: errors stay 7 s, information 4 s. */
import { h, icon } from "./dom.js";
import { els } from "./thread_state.js";

export function toast(text, kind) {
  kind = kind || "error";
  const close = h("button", { class: "icon-btn icon-btn-sm toast-close", attrs: { type: "button", "aria-label": "Dismiss" } }, icon("x"));
  const el = h("div", { class: "toast toast-" + kind, attrs: { role: kind === "error" ? "alert" : "status" } }, icon(kind === "error" ? "alert" : "info"), h("span", { class: "toast-text", text: String(text) }), close);
  const remove = function () {
    el.classList.add("is-leaving");
    setTimeout(function () {
      el.remove();
    }, 200);
  };
  close.addEventListener("click", remove);
  els.toasts.appendChild(el);
  setTimeout(remove, kind === "error" ? 7000 : 4000);
  return el;
}
