/* The renderer of a remote-dom view: the document the sandbox proxy writes into its inner
 * frame (on the view's server's sandbox origin, never the app origin) for a legacy MCP-UI
 * `application/vnd.mcp-ui.remote-dom+javascript` resource.
 *
 * - Draws the script's elements with Atrium's component library (custom elements below,
 *   in the host's light and dark theme) through @remote-dom/core's DOMRemoteReceiver, which
 *   admits only the library's elements, attributes and events (library.js).
 * - Runs the script in a hidden guest frame (guest.js; `sandbox="allow-scripts"`), as
 *   MCP-UI's client does, connected over @quilted/threads.
 * - Speaks MCP-UI's postMessage protocol to the host for the script: relays its UI actions
 *   (tool, prompt, link, notify, intent) up and the host's answers down, tells the host it
 *   is ready (`ui-lifecycle-iframe-ready`) and its size (`ui-size-change`), and follows the
 *   theme of the host's render data.
 * Its config (the script, the framework, the guest code) comes in a JSON block written by
 * static/chat/app_views/remote_dom.js. */
import { ThreadIframe } from "@quilted/threads";
import { DOMRemoteReceiver } from "@remote-dom/core/receivers";
import { ELEMENTS } from "./library.js";

const STYLE = `
:root { color-scheme: light; --rd-text: #1a1b21; --rd-muted: #6b6f7b; --rd-surface: #ffffff;
  --rd-border: #d7d7e0; --rd-accent: #5e5ce6; --rd-accent-hover: #4f4dd8; --rd-on-accent: #ffffff;
  --rd-focus: rgba(94, 92, 230, .35); --rd-error: #c4314b;
  --rd-font: -apple-system, BlinkMacSystemFont, "Segoe UI", "Inter", "Roboto", "Helvetica Neue", "Noto Sans", "Liberation Sans", Arial, sans-serif; }
:root[data-theme="dark"] { color-scheme: dark; --rd-text: #e8e9ed; --rd-muted: #8e929e; --rd-surface: #17181d;
  --rd-border: #33363e; --rd-accent: #7b79ff; --rd-accent-hover: #8e8cff; --rd-on-accent: #101114;
  --rd-focus: rgba(123, 121, 255, .45); --rd-error: #ff7b8f; }
html, body { margin: 0; padding: 0; background: var(--rd-surface); color: var(--rd-text); font: 14px/1.45 var(--rd-font); }
#atrium-remote-root { padding: 14px 16px; display: flow-root; }
.atrium-remote-error { color: var(--rd-error); font-size: 13px; margin: 8px 0 0; white-space: pre-wrap; }
`;

function shadow(host, css, html) {
  const root = host.attachShadow({ mode: "open" });
  root.innerHTML = "<style>" + css + "</style>" + html;
  return root;
}

class UiText extends HTMLElement {
  static get observedAttributes() {
    return ["content"];
  }
  constructor() {
    super();
    this.root = shadow(this, ":host{display:block;overflow-wrap:anywhere} .t{white-space:pre-wrap}", '<span class="t" part="text"></span><slot></slot>');
  }
  connectedCallback() {
    this.attributeChangedCallback();
  }
  attributeChangedCallback() {
    const content = this.getAttribute("content");
    this.root.querySelector(".t").textContent = content === null ? "" : content;
    this.root.querySelector("slot").hidden = content !== null && content !== "";
  }
}

class UiButton extends HTMLElement {
  static get observedAttributes() {
    return ["label", "disabled", "variant"];
  }
  constructor() {
    super();
    this.root = shadow(
      this,
      ":host{display:inline-block}" +
        "button{font:inherit;font-weight:600;padding:7px 14px;border-radius:8px;border:1px solid var(--rd-accent);background:var(--rd-accent);color:var(--rd-on-accent);cursor:pointer}" +
        "button:hover{background:var(--rd-accent-hover)} button:focus-visible{outline:3px solid var(--rd-focus);outline-offset:1px}" +
        "button.secondary{background:transparent;color:var(--rd-text);border-color:var(--rd-border)} button:disabled{opacity:.5;cursor:default}",
      '<button type="button" part="button"><span class="l"></span><slot></slot></button>'
    );
    // A native click crosses the shadow boundary by itself (remote `click` listeners get it);
    // `press` is MCP-UI's own event.
    this.root.querySelector("button").addEventListener("click", () => this.dispatchEvent(new CustomEvent("press")));
  }
  connectedCallback() {
    this.attributeChangedCallback();
  }
  attributeChangedCallback() {
    const button = this.root.querySelector("button");
    const label = this.getAttribute("label");
    button.querySelector(".l").textContent = label === null ? "" : label;
    button.querySelector("slot").hidden = label !== null && label !== "";
    button.disabled = this.hasAttribute("disabled") && this.getAttribute("disabled") !== "false";
    button.className = this.getAttribute("variant") === "secondary" ? "secondary" : "";
  }
}

class UiStack extends HTMLElement {
  static get observedAttributes() {
    return ["direction", "spacing", "align", "justify"];
  }
  constructor() {
    super();
    this.root = shadow(this, ":host{display:block} .s{display:flex}", '<div class="s" part="stack"><slot></slot></div>');
  }
  connectedCallback() {
    this.attributeChangedCallback();
  }
  attributeChangedCallback() {
    const div = this.root.querySelector(".s");
    const spacing = parseFloat(this.getAttribute("spacing") || "8");
    div.style.flexDirection = this.getAttribute("direction") === "horizontal" ? "row" : "column";
    div.style.flexWrap = this.getAttribute("direction") === "horizontal" ? "wrap" : "nowrap";
    div.style.gap = (isFinite(spacing) ? Math.max(0, Math.min(spacing, 96)) : 8) + "px";
    div.style.alignItems = cssKeyword(this.getAttribute("align"), "stretch");
    div.style.justifyContent = cssKeyword(this.getAttribute("justify"), "flex-start");
  }
}

function cssKeyword(value, fallback) {
  return /^(stretch|center|start|end|flex-start|flex-end|baseline|space-between|space-around|space-evenly)$/.test(value || "") ? value : fallback;
}

class UiImage extends HTMLElement {
  static get observedAttributes() {
    return ["src", "alt", "width", "height"];
  }
  constructor() {
    super();
    this.root = shadow(this, ":host{display:block} img{max-width:100%;height:auto;border-radius:8px}", '<img part="image" alt="">');
  }
  connectedCallback() {
    this.attributeChangedCallback();
  }
  attributeChangedCallback() {
    const img = this.root.querySelector("img");
    const src = this.getAttribute("src");
    if (src) img.src = src;
    else img.removeAttribute("src");
    img.alt = this.getAttribute("alt") || "";
    for (const name of ["width", "height"]) {
      const n = parseInt(this.getAttribute(name) || "", 10);
      if (n > 0) img.setAttribute(name, String(n));
      else img.removeAttribute(name);
    }
  }
}

class UiInput extends HTMLElement {
  static get observedAttributes() {
    return ["label", "placeholder", "value", "type", "name", "disabled"];
  }
  constructor() {
    super();
    this.root = shadow(
      this,
      ":host{display:block} label{display:flex;flex-direction:column;gap:4px} .l{font-size:12px;color:var(--rd-muted);font-weight:600}" +
        "input{font:inherit;color:var(--rd-text);background:var(--rd-surface);border:1px solid var(--rd-border);border-radius:8px;padding:7px 10px;min-width:0}" +
        "input:focus{outline:3px solid var(--rd-focus);outline-offset:0;border-color:var(--rd-accent)}",
      '<label part="field"><span class="l"></span><input part="input"></label>'
    );
    const input = this.root.querySelector("input");
    // The native events stop here: the element sends its own, with the value as detail
    // (what crosses to the script's listeners).
    input.addEventListener("input", (event) => {
      event.stopPropagation();
      this.dispatchEvent(new CustomEvent("input", { detail: input.value }));
    });
    input.addEventListener("change", (event) => {
      event.stopPropagation();
      this.dispatchEvent(new CustomEvent("change", { detail: input.value }));
    });
  }
  connectedCallback() {
    this.attributeChangedCallback("value");
  }
  attributeChangedCallback(name) {
    const input = this.root.querySelector("input");
    const label = this.getAttribute("label") || "";
    this.root.querySelector(".l").textContent = label;
    this.root.querySelector(".l").hidden = !label;
    input.placeholder = this.getAttribute("placeholder") || "";
    input.type = /^(text|number|email|search|url|tel|password)$/.test(this.getAttribute("type") || "") ? this.getAttribute("type") : "text";
    input.name = this.getAttribute("name") || "";
    input.disabled = this.hasAttribute("disabled") && this.getAttribute("disabled") !== "false";
    if (name === "value" && this.getAttribute("value") !== null && input.value !== this.getAttribute("value")) input.value = this.getAttribute("value");
  }
}

const IMPLEMENTATIONS = { "ui-text": UiText, "ui-button": UiButton, "ui-stack": UiStack, "ui-image": UiImage, "ui-input": UiInput };

function isThreadMessage(data) {
  return (Array.isArray(data) && typeof data[0] === "number") || data === "quilt.threads.ping" || data === "quilt.threads.pong";
}

function isMcpUiMessage(data) {
  return !!data && typeof data === "object" && !Array.isArray(data) && typeof data.type === "string";
}

function setTheme(theme) {
  if (theme === "light" || theme === "dark") document.documentElement.setAttribute("data-theme", theme);
}

function start() {
  const node = document.getElementById("atrium-remote-dom-config");
  let config = {};
  try {
    config = JSON.parse(node ? node.textContent : "{}") || {};
  } catch (e) {
    config = {};
  }
  setTheme(config.theme);
  const style = document.createElement("style");
  style.textContent = STYLE;
  document.head.appendChild(style);
  for (const def of ELEMENTS) {
    if (!customElements.get(def.tagName)) customElements.define(def.tagName, IMPLEMENTATIONS[def.tagName]);
  }

  const root = document.getElementById("atrium-remote-root");
  root.setAttribute("data-framework", config.framework === "react" ? "react" : "webcomponents");
  const policy = {};
  for (const def of ELEMENTS) {
    policy[def.tagName] = { attributes: def.attributes, events: Object.fromEntries(def.events.map((e) => [e, {}])) };
  }
  const receiver = new DOMRemoteReceiver({ root, elements: policy });

  const parentWindow = window.parent;
  const selfOrigin = window.origin && window.origin !== "null" ? window.origin : "*";
  const toHost = (message) => parentWindow.postMessage(message, selfOrigin);

  const guest = document.createElement("iframe");
  guest.setAttribute("sandbox", "allow-scripts");
  guest.setAttribute("title", "remote-dom script");
  guest.setAttribute("aria-hidden", "true");
  guest.tabIndex = -1;
  guest.style.display = "none";
  guest.srcdoc = '<!doctype html><html><head><meta charset="utf-8"></head><body><div id="root"></div><script>' + String(config.guest || "") + "<\/script></body></html>";

  window.addEventListener("message", (event) => {
    const data = event.data;
    if (event.source === guest.contentWindow) {
      // The script's UI actions go up as they are; the thread's own traffic stays here.
      if (!isThreadMessage(data) && isMcpUiMessage(data)) toHost(data);
      return;
    }
    if (event.source === parentWindow && isMcpUiMessage(data)) {
      if (data.type === "ui-lifecycle-iframe-render-data" && data.payload && data.payload.renderData) setTheme(data.payload.renderData.theme);
      if (guest.contentWindow) guest.contentWindow.postMessage(data, "*"); // an opaque origin
    }
  });

  let sent = 0;
  const reportSize = () => {
    const height = Math.ceil(root.getBoundingClientRect().height);
    if (height === sent) return;
    sent = height;
    toHost({ type: "ui-size-change", payload: { height } });
  };
  new ResizeObserver(reportSize).observe(root);

  let started = false;
  guest.addEventListener("load", () => {
    if (started) return;
    started = true;
    const thread = new ThreadIframe(guest);
    thread.imports.render({ code: String(config.script || ""), framework: config.framework || "" }, receiver.connection).then(
      () => toHost({ type: "ui-lifecycle-iframe-ready", payload: {} }),
      (err) => {
        // The script failed: what it built so far stays, the reason shows below it.
        const p = document.createElement("p");
        p.className = "atrium-remote-error";
        p.setAttribute("role", "alert");
        p.textContent = "The app's script failed: " + (err && err.message ? err.message : String(err));
        root.after(p);
        toHost({ type: "ui-lifecycle-iframe-ready", payload: {} });
      }
    );
  });
  document.body.appendChild(guest);
}

start();
