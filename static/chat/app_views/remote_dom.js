/* Legacy MCP-UI remote-dom views (`application/vnd.mcp-ui.remote-dom+javascript;
 * framework=react|webcomponents`): the document the sandbox proxy writes into its inner frame
 * instead of the resource itself, which is a script, not a page.
 *
 * That document (vendor/remote_dom_bundle.js, built by tools/remote-dom/build.mjs from the
 * pinned @remote-dom/core) runs on the view's sandbox origin, never here: it draws the
 * script's `ui-*` elements with Atrium's component library, runs the script in a hidden
 * `allow-scripts` frame of its own (as MCP-UI's client does) and speaks MCP-UI's postMessage
 * protocol, so compat_mcp_ui.js handles its actions like any legacy view's.
 * Built here only as text; the bundle module is loaded the first time a remote-dom view
 * appears. */

function safeJson(value) {
  return JSON.stringify(value)
    .replace(/</g, "\\u003c")
    .replace(/>/g, "\\u003e")
    .replace(/\u2028/g, "\\u2028")
    .replace(/\u2029/g, "\\u2029");
}

/** The HTML document of a remote-dom view running `script`. */
export function remoteDomDocument(script, { framework, theme } = {}) {
  return import("./vendor/remote_dom_bundle.js").then(({ RENDERER, GUEST }) => {
    const config = {
      script: String(script || ""),
      framework: framework === "react" ? "react" : "webcomponents",
      theme: theme === "dark" ? "dark" : "light",
      guest: GUEST,
    };
    return (
      '<!doctype html><html lang="en" data-theme="' + config.theme + '"><head><meta charset="utf-8">' +
      '<meta name="color-scheme" content="light dark"><title>remote-dom view</title></head><body>' +
      '<div id="atrium-remote-root"></div>' +
      '<script type="application/json" id="atrium-remote-dom-config">' + safeJson(config) + "<\/script>" +
      "<script>" + RENDERER + "<\/script></body></html>"
    );
  });
}
