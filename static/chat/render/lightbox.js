/* Presentational interactions of rendered content (no network): the image viewer and
 * "Show more" on long text parts. */
import { h, icon } from "../dom.js";
import { safeMediaSrc } from "../safe_urls.js";

let lightbox = null;
export function openLightbox(src, alt) {
  if (!safeMediaSrc(src, "image")) return;
  if (!lightbox) {
    lightbox = h(
      "dialog",
      { class: "lightbox", attrs: { "aria-label": "Image viewer" } },
      h("button", { class: "icon-btn lightbox-close", attrs: { type: "button", "aria-label": "Close" }, data: { action: "lightbox-close" } }, icon("x")),
      h("img", { class: "lightbox-img", attrs: { alt: "" } })
    );
    lightbox.addEventListener("click", function (event) {
      if (event.target === lightbox || event.target.closest('[data-action="lightbox-close"]')) lightbox.close();
    });
    document.body.appendChild(lightbox);
  }
  const img = lightbox.querySelector("img");
  img.src = src;
  img.alt = alt || "";
  if (typeof lightbox.showModal === "function") lightbox.showModal();
  else lightbox.setAttribute("open", "");
}

export function bindPresentationalActions() {
  document.addEventListener("click", function (event) {
    const target = event.target instanceof Element ? event.target.closest("[data-action]") : null;
    if (!target) return;
    const action = target.getAttribute("data-action");
    if (action === "lightbox") {
      event.preventDefault();
      openLightbox(target.getAttribute("data-src"), target.getAttribute("data-alt"));
    } else if (action === "expand-text") {
      const part = target.closest(".part-text");
      const expanded = part.classList.toggle("is-expanded");
      target.textContent = expanded ? "Show less" : "Show more";
      target.setAttribute("aria-expanded", String(expanded));
    }
  });
}
