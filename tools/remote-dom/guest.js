/* The guest frame of a remote-dom view: runs the MCP server's script (a hidden frame with
 * `sandbox="allow-scripts"`, an opaque origin, inside the view's sandbox document), as
 * MCP-UI's client does. The script gets `root` and builds `ui-*` elements on it; a
 * RemoteMutationObserver sends every change to the renderer over a @quilted/threads channel.
 * Its UI actions (`window.parent.postMessage({type: "tool" | "prompt" | …})`) go to the
 * renderer, which relays them to the host. */
import { ThreadNestedIframe } from "@quilted/threads";
import { RemoteElement, RemoteMutationObserver } from "@remote-dom/core/elements";
import { ELEMENTS } from "./library.js";

for (const def of ELEMENTS) {
  if (customElements.get(def.tagName)) continue;
  const element = class extends RemoteElement {
    static get remoteAttributes() {
      return def.attributes;
    }
    static get remoteEvents() {
      return def.events;
    }
  };
  customElements.define(def.tagName, element);
}

new ThreadNestedIframe({
  exports: {
    async render(options, connection) {
      const root = document.getElementById("root");
      const observer = new RemoteMutationObserver(connection);
      observer.observe(root);
      const code = options && typeof options.code === "string" ? options.code : "";
      // The same call as MCP-UI's client: the script sees `root` and `console`.
      const run = new Function("root", "console", code);
      run(root, console);
      return true;
    },
  },
});
