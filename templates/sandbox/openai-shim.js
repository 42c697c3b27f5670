/* Atrium's Apps SDK compatibility shim: window.openai (and its aliases window.aui and the
 * legacy window.webplus / window.oai).
 *
 * Inserted by the sandbox proxy at the start of a text/html+skybridge (or Apps SDK) app
 * document, so the widget finds window.openai before its own scripts run. It speaks the
 * same MCP Apps JSON-RPC over postMessage as any view: every method maps onto a request
 * the host forwards to the server, tagged params._compat = "openai" for the audit log.
 * It never talks to anything but window.parent (the proxy, which relays to the host).
 *
 * Included verbatim in templates/sandbox/proxy.html: keep it free of template tags and of
 * the closing-script sequence.
 */
(function (INIT) {
  "use strict";
  if (window.openai && window.openai.__atrium) return;

  const PROTOCOL_VERSION = "2026-01-26";
  const CALL_TIMEOUT_MS = 15 * 60 * 1000; // a tool call may wait for someone's approval
  const DEFAULT_TIMEOUT_MS = 30 * 1000;
  const host = window.parent;
  const init = INIT && typeof INIT === "object" ? INIT : {};
  let seq = 0;
  const pending = {};
  let initialized = false;
  let explicitHeight = false;

  function orNull(value) {
    return value === undefined ? null : value;
  }

  const globals = {
    toolInput: orNull(init.toolInput) || {},
    toolOutput: orNull(init.toolOutput),
    toolResponseMetadata: orNull(init.toolResponseMetadata),
    widgetState: orNull(init.widgetState),
    theme: init.theme === "dark" ? "dark" : "light",
    locale: typeof init.locale === "string" ? init.locale : navigator.language || "en-US",
    displayMode: typeof init.displayMode === "string" ? init.displayMode : "inline",
    maxHeight: typeof init.maxHeight === "number" ? init.maxHeight : 4000,
    safeArea: init.safeArea && typeof init.safeArea === "object" ? init.safeArea : { insets: { top: 0, bottom: 0, left: 0, right: 0 } },
    userAgent: init.userAgent && typeof init.userAgent === "object" ? init.userAgent : { device: { type: "desktop" }, capabilities: { hover: true, touch: false } },
    view: init.view && typeof init.view === "object" ? init.view : { mode: "inline", params: null },
  };

  function post(message) {
    host.postMessage(message, "*");
  }

  function request(method, params, timeoutMs) {
    seq += 1;
    const id = "atrium-openai:" + seq;
    return new Promise(function (resolve, reject) {
      const timer = setTimeout(function () {
        delete pending[id];
        const error = new Error(method + " timed out");
        error.code = -32001;
        reject(error);
      }, timeoutMs || DEFAULT_TIMEOUT_MS);
      pending[id] = { resolve: resolve, reject: reject, timer: timer };
      post({ jsonrpc: "2.0", id: id, method: method, params: params || {} });
    });
  }

  function notify(method, params) {
    post({ jsonrpc: "2.0", method: method, params: params || {} });
  }

  function compat(params) {
    const out = params && typeof params === "object" ? params : {};
    out._compat = "openai";
    return out;
  }

  function same(a, b) {
    if (a === b) return true;
    try {
      return JSON.stringify(a) === JSON.stringify(b);
    } catch (e) {
      return false;
    }
  }

  function announce(changed) {
    const names = ["openai:set_globals", "aui:set_globals", "webplus:set_globals"];
    for (let i = 0; i < names.length; i++) {
      try {
        window.dispatchEvent(new CustomEvent(names[i], { detail: { globals: changed } }));
      } catch (e) {
        /* a listener threw: not ours to handle */
      }
    }
  }

  function setGlobals(changes) {
    const changed = {};
    let any = false;
    Object.keys(changes).forEach(function (key) {
      if (!same(globals[key], changes[key])) {
        globals[key] = changes[key];
        changed[key] = changes[key];
        any = true;
      }
    });
    if (any) announce(changed);
  }

  /** MCP Apps hostContext (full or partial) → Apps SDK globals. */
  function applyHostContext(ctx) {
    if (!ctx || typeof ctx !== "object") return;
    const changes = {};
    if (ctx.theme === "light" || ctx.theme === "dark") changes.theme = ctx.theme;
    if (typeof ctx.locale === "string") changes.locale = ctx.locale;
    if (typeof ctx.displayMode === "string") changes.displayMode = ctx.displayMode;
    const dims = ctx.containerDimensions;
    if (dims && typeof dims === "object") {
      const max = typeof dims.maxHeight === "number" ? dims.maxHeight : dims.height;
      if (typeof max === "number") changes.maxHeight = max;
    }
    const insets = ctx.safeAreaInsets;
    if (insets && typeof insets === "object") {
      changes.safeArea = { insets: { top: insets.top || 0, bottom: insets.bottom || 0, left: insets.left || 0, right: insets.right || 0 } };
    }
    const caps = ctx.deviceCapabilities;
    if (caps && typeof caps === "object") {
      changes.userAgent = {
        device: { type: ctx.platform === "mobile" ? "mobile" : caps.touch && !caps.hover ? "tablet" : "desktop" },
        capabilities: { hover: !!caps.hover, touch: !!caps.touch },
      };
    }
    if (changes.theme) {
      try {
        document.documentElement.dataset.theme = changes.theme;
        document.documentElement.style.colorScheme = changes.theme;
      } catch (e) {
        /* before <html> exists */
      }
    }
    setGlobals(changes);
  }

  function textOf(result) {
    const blocks = result && Array.isArray(result.content) ? result.content : [];
    return blocks
      .filter(function (b) {
        return b && b.type === "text" && typeof b.text === "string";
      })
      .map(function (b) {
        return b.text;
      })
      .join("\n");
  }

  window.addEventListener("message", function (event) {
    if (event.source !== host) return;
    const msg = event.data;
    if (!msg || typeof msg !== "object" || msg.jsonrpc !== "2.0") return;
    if (typeof msg.method !== "string") {
      const entry = msg.id !== undefined ? pending[msg.id] : null;
      if (!entry) return; // a response to the app's own request
      delete pending[msg.id];
      clearTimeout(entry.timer);
      if (msg.error) {
        const error = new Error((msg.error && msg.error.message) || "The host refused the request.");
        error.code = msg.error.code;
        error.data = msg.error.data;
        entry.reject(error);
      } else {
        entry.resolve(msg.result);
      }
      return;
    }
    const params = msg.params && typeof msg.params === "object" ? msg.params : {};
    switch (msg.method) {
      case "ui/notifications/tool-input":
      case "ui/notifications/tool-input-partial":
        if (params.arguments && typeof params.arguments === "object") setGlobals({ toolInput: params.arguments });
        break;
      case "ui/notifications/tool-result":
        setGlobals({ toolOutput: orNull(params.structuredContent), toolResponseMetadata: orNull(params._meta) });
        break;
      case "ui/notifications/host-context-changed":
        applyHostContext(params);
        break;
      case "atrium/notifications/widget-state":
        setGlobals({ widgetState: orNull(params.state) });
        break;
      case "ui/resource-teardown":
        if (msg.id !== undefined) post({ jsonrpc: "2.0", id: msg.id, result: {} });
        break;
      default:
        break; // the app's own MCP Apps client (if any) handles the rest
    }
  });

  // ---- size: explicit (notifyIntrinsicHeight) or observed -----------------------------------

  let lastHeight = 0;
  function reportHeight(height) {
    height = Math.ceil(Number(height) || 0);
    if (!initialized || height <= 0 || Math.abs(height - lastHeight) < 2) return;
    lastHeight = height;
    notify("ui/notifications/size-changed", { height: height });
  }
  function observedHeight() {
    const body = document.body;
    if (!body) return 0;
    const rect = body.getBoundingClientRect();
    const style = window.getComputedStyle(body);
    return rect.height + (parseFloat(style.marginTop) || 0) + (parseFloat(style.marginBottom) || 0);
  }
  function watchSize() {
    if (!window.ResizeObserver || !document.body) return;
    new ResizeObserver(function () {
      if (!explicitHeight) reportHeight(observedHeight());
    }).observe(document.body);
  }

  // ---- the public surface -------------------------------------------------------------------

  const api = {
    callTool: function (name, args) {
      return request("tools/call", compat({ name: String(name), arguments: args && typeof args === "object" ? args : {} }), CALL_TIMEOUT_MS).then(function (result) {
        const out = result && typeof result === "object" ? result : {};
        // Older widgets read `.result` (text); newer ones the CallToolResult fields.
        if (out.result === undefined) out.result = textOf(out);
        return out;
      });
    },
    setWidgetState: function (state) {
      const value = orNull(state);
      setGlobals({ widgetState: value });
      return request("atrium/setWidgetState", compat({ state: value })).then(function () {
        return undefined;
      });
    },
    sendFollowUpMessage: function (options) {
      const prompt = options && typeof options === "object" ? options.prompt : options;
      return request("ui/message", compat({ role: "user", content: [{ type: "text", text: String(prompt || "") }] })).then(function () {
        return undefined;
      });
    },
    requestDisplayMode: function (options) {
      const mode = options && typeof options === "object" ? options.mode : options;
      return request("ui/request-display-mode", compat({ mode: String(mode || "inline") })).then(function (result) {
        const granted = result && typeof result.mode === "string" ? result.mode : globals.displayMode;
        setGlobals({ displayMode: granted });
        return { mode: granted };
      });
    },
    requestModal: function (options) {
      const o = options && typeof options === "object" ? options : {};
      return request("openai/requestModal", compat({ title: typeof o.title === "string" ? o.title : "", params: orNull(o.params) })).then(function () {
        return undefined;
      });
    },
    requestClose: function () {
      notify("ui/notifications/request-teardown", compat({}));
      return Promise.resolve();
    },
    openExternal: function (options) {
      const href = options && typeof options === "object" ? options.href : options;
      return request("ui/open-link", compat({ url: String(href || "") })).then(function () {
        return undefined;
      });
    },
    setOpenInAppUrl: function (options) {
      const href = options && typeof options === "object" ? options.href : options;
      return request("openai/setOpenInAppUrl", compat({ href: String(href || "") })).then(function () {
        return undefined;
      });
    },
    // Files (issue 26 part 4): the host uploads the body, decides and gives file ids.
    uploadFile: function (file) {
      return request("openai/uploadFile", compat({ file: file }), CALL_TIMEOUT_MS);
    },
    getFileDownloadUrl: function (options) {
      const fileId = options && typeof options === "object" ? options.fileId : options;
      // A file just uploaded is stored by a worker first: "not_ready" is asked again.
      function ask(attempt) {
        return request("openai/getFileDownloadUrl", compat({ fileId: String(fileId || "") })).catch(function (error) {
          const reason = error && error.data && error.data.reason;
          if ((reason === "not_ready" || (error && error.message && /still being stored/.test(error.message))) && attempt < 40) {
            return new Promise(function (resolve) {
              setTimeout(resolve, Math.min(250 * (attempt + 1), 2000));
            }).then(function () {
              return ask(attempt + 1);
            });
          }
          throw error;
        });
      }
      return ask(0);
    },
    selectFiles: function (options) {
      const o = options && typeof options === "object" ? options : {};
      return request("openai/selectFiles", compat({ multiple: o.multiple === true }), CALL_TIMEOUT_MS);
    },
    notifyIntrinsicHeight: function (height) {
      explicitHeight = true;
      reportHeight(height);
    },
  };
  Object.keys(globals).forEach(function (key) {
    Object.defineProperty(api, key, {
      enumerable: true,
      get: function () {
        return globals[key];
      },
    });
  });
  Object.defineProperty(api, "__atrium", { value: true });

  try {
    Object.defineProperty(window, "openai", { value: api, configurable: true, enumerable: true, writable: false });
    Object.defineProperty(window, "aui", { value: api, configurable: true, enumerable: true, writable: false });
    // The Apps SDK's older names of the same object (widgets built for its first releases).
    Object.defineProperty(window, "webplus", { value: api, configurable: true, enumerable: true, writable: false });
    Object.defineProperty(window, "oai", { value: api, configurable: true, enumerable: true, writable: false });
  } catch (e) {
    window.openai = api;
    window.aui = api;
    window.webplus = api;
    window.oai = api;
  }

  // ---- MCP Apps handshake (the widget itself knows nothing of it) -----------------------------

  request("ui/initialize", {
    protocolVersion: PROTOCOL_VERSION,
    appInfo: { name: "atrium-apps-sdk-shim", version: "1.0.0" },
    appCapabilities: { availableDisplayModes: ["inline", "fullscreen", "pip"] },
  }).then(
    function (result) {
      applyHostContext(result && result.hostContext);
      initialized = true;
      notify("ui/notifications/initialized", {});
      if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", watchSize);
      else watchSize();
    },
    function () {
      /* no host answered: the widget still runs with its start-up globals */
    }
  );
})(/*ATRIUM_OPENAI_INIT*/null);
