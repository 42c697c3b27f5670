/* An app view opens only when its row comes within LAZY_MARGIN of the visible timeline. */
import { LAZY_MARGIN } from "./config.js";
import { viewForContainer } from "./registry.js";

const observers = new Map(); // scroll root → IntersectionObserver

function scrollRoot(el) {
  let node = el.parentElement;
  while (node && node !== document.body && node !== document.documentElement) {
    const style = window.getComputedStyle(node);
    if (/(auto|scroll|overlay)/.test(style.overflowY)) return node;
    node = node.parentElement;
  }
  return null;
}

/** Opens `view` once its container is near; returns the observer watching it (or null). */
export function openWhenNear(view) {
  if (typeof IntersectionObserver !== "function") {
    view.lifecycle.open();
    return null;
  }
  const root = scrollRoot(view.container);
  let observer = observers.get(root);
  if (!observer) {
    observer = new IntersectionObserver(
      function (entries) {
        entries.forEach(function (entry) {
          if (!entry.isIntersecting) return;
          observer.unobserve(entry.target);
          const v = viewForContainer(entry.target);
          if (v && v.lifecycle.phase === "idle") v.lifecycle.open();
        });
      },
      { root: root, rootMargin: LAZY_MARGIN }
    );
    observers.set(root, observer);
  }
  observer.observe(view.container);
  return observer;
}
