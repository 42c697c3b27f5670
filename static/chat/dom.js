/*
 * The one element helper of the page scripts (chat timeline and app views alike), and the
 * stroke icons they draw. Everything is built with createElement/textContent: the only
 * innerHTML in the client is a message's server-rendered, sanitized Markdown.
 */

export const SVG_NS = "http://www.w3.org/2000/svg";

/**
 * h("div", {class: "x", text: "hi", data: {id: 1}, attrs: {title: "t"}, on: {click: fn}}, child, "text")
 * Strings become text nodes. Never sets innerHTML or a style attribute.
 */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  if (props) {
    if (props["class"]) el.className = props["class"];
    if (props.text !== undefined && props.text !== null) el.textContent = String(props.text);
    if (props.data) {
      for (const k in props.data) {
        if (props.data[k] !== undefined && props.data[k] !== null) el.dataset[k] = String(props.data[k]);
      }
    }
    if (props.attrs) {
      for (const a in props.attrs) {
        const v = props.attrs[a];
        if (v === undefined || v === null || v === false || a === "style") continue;
        el.setAttribute(a, v === true ? "" : String(v));
      }
    }
    if (props.on) {
      for (const type in props.on) el.addEventListener(type, props.on[type]);
    }
  }
  children.forEach((child) => append(el, child));
  return el;
}

export function append(parent, child) {
  if (child === null || child === undefined || child === false) return;
  if (Array.isArray(child)) {
    child.forEach((c) => append(parent, c));
    return;
  }
  parent.appendChild(typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : child);
}

// Stroke icons (24×24), drawn with currentColor. The last group is the app views' chrome.
const ICONS = {
  wrench: [["path", "M14.7 6.3a1 1 0 0 0 0 1.4l1.6 1.6a1 1 0 0 0 1.4 0l3.77-3.77a6 6 0 0 1-7.94 7.94l-6.91 6.91a2.12 2.12 0 0 1-3-3l6.91-6.91a6 6 0 0 1 7.94-7.94l-3.76 3.76z"]],
  check: [["path", "m5 12 5 5 9-10"]],
  x: [["path", "M18 6 6 18M6 6l12 12"]],
  alert: [["path", "M10.3 3.9 1.8 18a2 2 0 0 0 1.7 3h17a2 2 0 0 0 1.7-3L13.7 3.9a2 2 0 0 0-3.4 0zM12 9v4M12 17h.01"]],
  info: [["circle", 12, 12, 9], ["path", "M12 16v-4M12 8h.01"]],
  clock: [["circle", 12, 12, 9], ["path", "M12 7v5l3 2"]],
  shield: [["path", "M12 22s8-4 8-10V5l-8-3-8 3v7c0 6 8 10 8 10z"]],
  ban: [["circle", 12, 12, 9], ["path", "m5.6 5.6 12.8 12.8"]],
  image: [["rect", 3, 3, 18, 18, 2], ["circle", 9, 9, 2], ["path", "m21 15-5-5L5 21"]],
  file: [["path", "M14 2H6a2 2 0 0 0-2 2v16a2 2 0 0 0 2 2h12a2 2 0 0 0 2-2V8zM14 2v6h6"]],
  music: [["path", "M9 18V5l12-2v13"], ["circle", 6, 18, 3], ["circle", 18, 16, 3]],
  video: [["path", "m22 8-6 4 6 4z"], ["rect", 2, 6, 14, 12, 2]],
  download: [["path", "M21 15v4a2 2 0 0 1-2 2H5a2 2 0 0 1-2-2v-4M7 10l5 5 5-5M12 15V3"]],
  link: [["path", "M10 13a5 5 0 0 0 7.54.54l3-3a5 5 0 0 0-7.07-7.07l-1.72 1.71M14 11a5 5 0 0 0-7.54-.54l-3 3a5 5 0 0 0 7.07 7.07l1.71-1.71"]],
  external: [["path", "M15 3h6v6M10 14 21 3M18 13v6a2 2 0 0 1-2 2H5a2 2 0 0 1-2-2V8a2 2 0 0 1 2-2h6"]],
  sparkle: [["path", "M12 3l1.8 5.2L19 10l-5.2 1.8L12 17l-1.8-5.2L5 10l5.2-1.8zM19 15l.8 2.2L22 18l-2.2.8L19 21l-.8-2.2L16 18l2.2-.8z"]],
  app: [["rect", 3, 3, 7, 7, 1.5], ["rect", 14, 3, 7, 7, 1.5], ["rect", 3, 14, 7, 7, 1.5], ["rect", 14, 14, 7, 7, 1.5]],
  layout: [["rect", 3, 4, 18, 16, 2], ["path", "M3 9h18"]],
  code: [["path", "m16 18 6-6-6-6M8 6l-6 6 6 6"]],
  user: [["circle", 12, 8, 4], ["path", "M20 21a8 8 0 0 0-16 0"]],
  cpu: [["rect", 5, 5, 14, 14, 2], ["path", "M9 1v4M15 1v4M9 19v4M15 19v4M1 9h4M1 15h4M19 9h4M19 15h4"]],
  chevron: [["path", "m9 6 6 6-6 6"]],
  expand: [["path", "M15 3h6v6M9 21H3v-6M21 3l-7 7M3 21l7-7"]],
  stop: [["rect", 6, 6, 12, 12, 2]],
  hourglass: [["path", "M6 2h12M6 22h12M7 2c0 5 10 5 10 10S7 17 7 22M17 2c0 5-10 5-10 10s10 5 10 10"]],
  pip: [["path", "M3 5h18v14H3zM12 12h7v5h-7z"]],
  fullscreen: [["path", "M4 9V4h5M20 9V4h-5M4 15v5h5M20 15v5h-5"]],
  inline: [["path", "M9 4v5H4M15 4v5h5M9 20v-5H4M15 20v-5h5"]],
  close: [["path", "M6 6l12 12M18 6 6 18"]],
  reload: [["path", "M20 11a8 8 0 1 0-2.3 5.7M20 4v7h-7"]],
  trash: [["path", "M3 6h18M8 6V4a1 1 0 0 1 1-1h6a1 1 0 0 1 1 1v2M19 6l-1 14a2 2 0 0 1-2 2H8a2 2 0 0 1-2-2L5 6M10 11v6M14 11v6"]],
};

export function icon(name, cls) {
  const svg = document.createElementNS(SVG_NS, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  svg.setAttribute("class", "icon" + (cls ? " " + cls : ""));
  (ICONS[name] || ICONS.info).forEach((spec) => {
    const el = document.createElementNS(SVG_NS, spec[0]);
    if (spec[0] === "path") el.setAttribute("d", spec[1]);
    else if (spec[0] === "circle") {
      el.setAttribute("cx", spec[1]);
      el.setAttribute("cy", spec[2]);
      el.setAttribute("r", spec[3]);
    } else if (spec[0] === "rect") {
      el.setAttribute("x", spec[1]);
      el.setAttribute("y", spec[2]);
      el.setAttribute("width", spec[3]);
      el.setAttribute("height", spec[4]);
      el.setAttribute("rx", spec[5]);
    }
    svg.appendChild(el);
  });
  return svg;
}

export function logoMark() {
  const svg = document.createElementNS(SVG_NS, "svg");
  svg.setAttribute("viewBox", "0 0 32 32");
  svg.setAttribute("class", "logo-inline");
  svg.setAttribute("aria-hidden", "true");
  const path = document.createElementNS(SVG_NS, "path");
  path.setAttribute("d", "M9 23 16 8l7 15M11.8 17.5h8.4");
  svg.appendChild(path);
  return svg;
}
