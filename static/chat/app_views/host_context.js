/* What the host tells an app view about itself: theme, style tokens, locale, device,
 * sandbox capabilities, the tool being shown (MCP Apps hostContext). */
import { HOST_INFO } from "./config.js";
import { same } from "./rpc.js";

export function currentTheme() {
  return document.documentElement.getAttribute("data-theme") === "dark" ? "dark" : "light";
}

// MCP Apps style tokens ← the host page's tokens (static/chat/app.css); the MCP name
// itself wins when the page defines it.
const STYLE_SOURCES = {
  "--color-background-primary": ["--surface", "--bg"],
  "--color-background-secondary": ["--surface-2", "--bg-subtle"],
  "--color-background-tertiary": ["--surface-3"],
  "--color-background-inverse": ["--text"],
  "--color-background-ghost": ["--bg-hover"],
  "--color-background-info": ["--accent-soft"],
  "--color-background-danger": ["--red-soft"],
  "--color-background-success": ["--green-soft"],
  "--color-background-warning": ["--amber-soft"],
  "--color-background-disabled": ["--surface-3"],
  "--color-text-primary": ["--text"],
  "--color-text-secondary": ["--muted", "--text-2"],
  "--color-text-tertiary": ["--faint"],
  "--color-text-inverse": ["--bg"],
  "--color-text-ghost": ["--faint"],
  "--color-text-info": ["--accent-text"],
  "--color-text-danger": ["--red"],
  "--color-text-success": ["--green"],
  "--color-text-warning": ["--amber"],
  "--color-text-disabled": ["--faint"],
  "--color-border-primary": ["--border"],
  "--color-border-secondary": ["--border-strong"],
  "--color-border-tertiary": ["--border"],
  "--color-border-inverse": ["--text"],
  "--color-border-ghost": ["--bg-hover"],
  "--color-border-info": ["--accent"],
  "--color-border-danger": ["--red"],
  "--color-border-success": ["--green"],
  "--color-border-warning": ["--amber"],
  "--color-border-disabled": ["--border"],
  "--color-ring-primary": ["--accent"],
  "--color-ring-secondary": ["--border-strong"],
  "--color-ring-inverse": ["--bg"],
  "--color-ring-info": ["--accent"],
  "--color-ring-danger": ["--red"],
  "--color-ring-success": ["--green"],
  "--color-ring-warning": ["--amber"],
  "--font-sans": ["--font-sans"],
  "--font-mono": ["--font-mono"],
  "--border-radius-xs": ["--radius-xs"],
  "--border-radius-sm": ["--radius-sm"],
  "--border-radius-md": ["--radius"],
  "--border-radius-lg": ["--radius-lg"],
  "--border-radius-xl": ["--radius-xl"],
  "--shadow-sm": ["--shadow-sm"],
  "--shadow-md": ["--shadow"],
  "--shadow-lg": ["--shadow-lg"],
};

const STYLE_CONSTANTS = {
  "--font-weight-normal": "400",
  "--font-weight-medium": "500",
  "--font-weight-semibold": "600",
  "--font-weight-bold": "700",
  "--font-text-xs-size": "11px",
  "--font-text-sm-size": "12.5px",
  "--font-text-md-size": "14px",
  "--font-text-lg-size": "16px",
  "--font-heading-xs-size": "13px",
  "--font-heading-sm-size": "15px",
  "--font-heading-md-size": "17px",
  "--font-heading-lg-size": "20px",
  "--font-heading-xl-size": "24px",
  "--font-heading-2xl-size": "30px",
  "--font-heading-3xl-size": "36px",
  "--font-text-xs-line-height": "1.4",
  "--font-text-sm-line-height": "1.45",
  "--font-text-md-line-height": "1.5",
  "--font-text-lg-line-height": "1.5",
  "--font-heading-xs-line-height": "1.3",
  "--font-heading-sm-line-height": "1.3",
  "--font-heading-md-line-height": "1.25",
  "--font-heading-lg-line-height": "1.2",
  "--font-heading-xl-line-height": "1.2",
  "--font-heading-2xl-line-height": "1.15",
  "--font-heading-3xl-line-height": "1.1",
  "--border-radius-full": "9999px",
  "--border-width-regular": "1px",
};

export function hostStyles() {
  const computed = window.getComputedStyle(document.documentElement);
  const variables = {};
  Object.keys(STYLE_SOURCES).forEach(function (name) {
    const candidates = [name].concat(STYLE_SOURCES[name]);
    for (let i = 0; i < candidates.length; i++) {
      const value = computed.getPropertyValue(candidates[i]).trim();
      if (value) {
        variables[name] = value;
        return;
      }
    }
  });
  Object.keys(STYLE_CONSTANTS).forEach(function (name) {
    variables[name] = computed.getPropertyValue(name).trim() || STYLE_CONSTANTS[name];
  });
  if (variables["--color-border-primary"]) variables["--shadow-hairline"] = "0 0 0 1px " + variables["--color-border-primary"];
  return { variables: variables };
}

export function deviceCapabilities() {
  const mq = function (q) {
    return !!(window.matchMedia && window.matchMedia(q).matches);
  };
  return { touch: mq("(pointer: coarse)") || (navigator.maxTouchPoints || 0) > 0, hover: mq("(hover: hover)") };
}

export function locale() {
  return document.documentElement.lang && document.documentElement.lang.length > 1 ? navigator.language || document.documentElement.lang : navigator.language || "en-US";
}

export function timeZone() {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  } catch (e) {
    return "UTC";
  }
}

/** The effective CSP header → McpUiResourceCsp-shaped domains (hostCapabilities.sandbox.csp). */
export function cspDomains(header) {
  const out = { connectDomains: [], resourceDomains: [], frameDomains: [], baseUriDomains: [] };
  const map = { "connect-src": "connectDomains", "script-src": "resourceDomains", "style-src": "resourceDomains", "img-src": "resourceDomains", "font-src": "resourceDomains", "media-src": "resourceDomains", "frame-src": "frameDomains", "base-uri": "baseUriDomains" };
  String(header || "")
    .split(";")
    .forEach(function (directive) {
      const parts = directive.trim().split(/\s+/);
      const key = map[(parts.shift() || "").toLowerCase()];
      if (!key) return;
      parts.forEach(function (token) {
        if (!token || token.charAt(0) === "'" || /^[a-z]+:$/i.test(token) || token === "*") return;
        if (out[key].indexOf(token) < 0) out[key].push(token);
      });
    });
  return out;
}

const PERMISSION_NAMES = ["camera", "microphone", "geolocation", "clipboardWrite"];

export function permissionObject(granted) {
  const out = {};
  (Array.isArray(granted) ? granted : []).forEach(function (name) {
    if (PERMISSION_NAMES.indexOf(name) >= 0) out[name] = {};
  });
  return out;
}

const ANNOTATION_KEYS = { title: "string", readOnlyHint: "boolean", destructiveHint: "boolean", idempotentHint: "boolean", openWorldHint: "boolean" };

export function toolInfo(info) {
  if (!info || typeof info !== "object" || !info.tool) return undefined;
  const tool = info.tool;
  const schema = tool.inputSchema && typeof tool.inputSchema === "object" && tool.inputSchema.type === "object" ? tool.inputSchema : { type: "object" };
  const out = { name: String(tool.name || ""), inputSchema: schema };
  if (typeof tool.title === "string" && tool.title) out.title = tool.title;
  if (typeof tool.description === "string" && tool.description) out.description = tool.description;
  if (tool.annotations && typeof tool.annotations === "object") {
    const ann = {};
    Object.keys(ANNOTATION_KEYS).forEach(function (k) {
      if (typeof tool.annotations[k] === ANNOTATION_KEYS[k]) ann[k] = tool.annotations[k];
    });
    out.annotations = ann;
  }
  const result = { tool: out };
  if (typeof info.id === "number" || typeof info.id === "string") result.id = info.id;
  return result;
}

/** What the host tells one view about itself (ui/initialize, host-context-changed).
 *  Uses its view's frame (dimensions), modes (the mode), bridge (ready? protocol, post),
 *  lifecycle (the view.open reply) and mcpUi (a legacy view gets render data instead). */
export class HostContext {
  constructor(view) {
    this.view = view;
    this.last = null; // what the view was last told
  }

  current() {
    const { frame, modes, lifecycle } = this.view;
    const ctx = {
      theme: currentTheme(),
      styles: hostStyles(),
      displayMode: modes.reported(),
      availableDisplayModes: modes.hostModes(),
      containerDimensions: frame.dimensions(),
      locale: locale(),
      timeZone: timeZone(),
      userAgent: "Atrium/" + HOST_INFO.version + " (web)",
      platform: "web",
      deviceCapabilities: deviceCapabilities(),
      safeAreaInsets: { top: 0, right: 0, bottom: 0, left: 0 },
    };
    const info = toolInfo(lifecycle.reply && lifecycle.reply.toolInfo);
    if (info) ctx.toolInfo = info;
    return ctx;
  }

  capabilities() {
    const reply = this.view.lifecycle.reply;
    return {
      openLinks: {},
      downloadFile: {},
      serverTools: {},
      serverResources: {},
      logging: {},
      // Content modalities the host honours (issue 27: images reach the model as image
      // parts where its provider takes them, else as a described reference; chat/view_tools).
      updateModelContext: { text: {}, image: {}, resource: {}, resourceLink: {}, structuredContent: {} },
      message: { text: {}, image: {}, resource: {}, resourceLink: {} },
      sampling: {}, // sampling/createMessage: the consent card, then the workspace's model
      sandbox: { permissions: permissionObject(reply && reply.permissions), csp: cspDomains(reply && reply.csp) },
    };
  }

  /** Tell a ready view what changed (only the keys that did). */
  changed() {
    const { bridge, mcpUi } = this.view;
    if (!bridge.ready) return;
    if (bridge.protocol === "legacy") {
      mcpUi.sendRenderData();
      return;
    }
    const ctx = this.current();
    const prev = this.last || {};
    const delta = {};
    ["theme", "styles", "displayMode", "containerDimensions", "locale", "timeZone"].forEach((k) => {
      if (!same(ctx[k], prev[k])) delta[k] = ctx[k];
    });
    this.last = ctx;
    if (Object.keys(delta).length) bridge.post({ jsonrpc: "2.0", method: "ui/notifications/host-context-changed", params: delta });
  }
}
