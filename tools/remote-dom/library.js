/* Atrium's remote-dom component library: the elements a legacy MCP-UI remote-dom script may
 * build (`document.createElement("ui-button")` …), as MCP-UI's basic library and its demo
 * define them (remoteTextDefinition, remoteButtonDefinition, remoteStackDefinition,
 * remoteImageDefinition), plus `ui-input`. One list gives both sides:
 * - the guest (the server's script) defines them as @remote-dom/core RemoteElements, so their
 *   attributes and events cross to the renderer;
 * - the renderer allows exactly these elements, attributes and events
 *   (DOMRemoteReceiver's `elements` policy) and draws them with its own custom elements
 *   (renderer.js): anything else the script builds is refused.
 * Built into static/chat/app_views/vendor/remote_dom_bundle.js by build.mjs. */
export const ELEMENTS = [
  { tagName: "ui-text", attributes: ["content"], events: [] },
  { tagName: "ui-button", attributes: ["label", "disabled", "variant"], events: ["press", "click"] },
  { tagName: "ui-stack", attributes: ["direction", "spacing", "align", "justify"], events: [] },
  { tagName: "ui-image", attributes: ["src", "alt", "width", "height"], events: [] },
  { tagName: "ui-input", attributes: ["label", "placeholder", "value", "type", "name", "disabled"], events: ["input", "change"] },
];
