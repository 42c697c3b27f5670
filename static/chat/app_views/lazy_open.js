/* An app view opens only when its row comes within LAZY_MARGIN of the visible timeline. */
import { LAZY_MARGIN } from "./config.js";
import { viewForContainer } from "./registry.js";

const observers = new Map(); // scroll root → IntersectionObserver

function scrollRoot(el) {
  var node = el.parentElement;
  while (node && node !== document.body && node !== document.documentElement) {
    var style = window.getComputedStyle(node);
    if (/(auto|scroll|overlay)/.test(style.overflowY)) return node;
    node = node.parentElement;
  }
  return null;
}

export function openWhenNear(view) {
  if (typeof IntersectionObserver !== "function") {
    view.open();
    return;
  }
  var root = scrollRoot(view.container);
  var observer = observers.get(root);
  if (!observer) {
    observer = new IntersectionObserver(
      function (entries) {
        entries.forEach(function (entry) {
          if (!entry.isIntersecting) return;
          observer.unobserve(entry.target);
          var v = viewForContainer(entry.target);
          if (v && v.phase === "idle") v.open();
        });
      },
      { root: root, rootMargin: LAZY_MARGIN }
    );
    observers.set(root, observer);
  }
  view.observer = observer;
  observer.observe(view.container);
}
