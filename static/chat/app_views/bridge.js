/* One view's end of the host bridge: host_bridge.js's JSON-RPC handling, bound to this
 * view's collaborators.
 *
 * host_bridge.js is written as functions of `this` (bridgeMethods). A BridgePort is that
 * `this`: it holds the bridge's own per-document state (the token and origin, the
 * negotiated protocol, requests the host awaits, the paces of forwarded notifications) and
 * answers every other name the bridge reads with the collaborator that owns it — the
 * complete list of what the bridge may reach is the class body below.
 *
 * Other collaborators use: post, respond, respondError, forward, notifyServer, allowLog,
 * showNotice, onMessage, and the state fields. */
import { bridgeMethods } from "./host_bridge.js";

export class BridgePort {
  constructor(view) {
    this.view = view;
    this.token = null; // the view's capability token (view.open; refreshed once when it expires)
    this.origin = null; // the frame's sandbox origin: posts go there, messages must come from it
    this.appInfo = null;
    this.pendingSize = null;
    this.noticeTimer = null;
    this.reset();
    Object.assign(this, bridgeMethods);
  }

  /** Per document: nothing negotiated, nothing awaited. */
  reset() {
    this.ready = false; // the view said ui/notifications/initialized (or MCP-UI iframe-ready)
    this.protocol = null; // "mcp" | "legacy"
    this.appCaps = null; // ui/initialize's appCapabilities
    this.hostPending = {}; // id of a request the host sent → its answer's callback
    this.logTimes = [];
    this.sizeNotifyTimer = null;
  }

  // What the bridge reads of the view.
  get frame() {
    return this.view.frame.iframe;
  }
  get notice() {
    return this.view.frame.notice;
  }
  get client() {
    return this.view.client;
  }
  get id() {
    return this.view.id;
  }
  get closed() {
    return this.view.closed;
  }
  get mode() {
    return this.view.modes.mode;
  }
  get lastContext() {
    return this.view.context.last;
  }
  set lastContext(context) {
    this.view.context.last = context;
  }
  appName() {
    return this.view.appName();
  }

  // The host steps of its methods, each done by the collaborator that owns it.
  onProxyReady() {
    this.view.lifecycle.onProxyReady();
  }
  markReady() {
    this.view.lifecycle.markReady();
  }
  honourTeardown() {
    this.view.lifecycle.honourTeardown();
  }
  onSize(params) {
    this.view.frame.onSize(params);
  }
  setMode(mode, source) {
    return this.view.modes.setMode(mode, source);
  }
  renderModeButtons() {
    this.view.modes.renderButtons();
  }
  requestDisplayMode(id, params) {
    this.view.modes.request(id, params);
  }
  hostContext() {
    return this.view.context.current();
  }
  hostCapabilities() {
    return this.view.context.capabilities();
  }
  openLink(id, params) {
    this.view.cards.openLink(id, params);
  }
  sendMessage(id, params) {
    this.view.cards.sendMessage(id, params);
  }
  openModal(id, params) {
    this.view.openai.openModal(id, params);
  }
  setWidgetState(id, params) {
    this.view.openai.setWidgetState(id, params);
  }
  onLegacy(msg) {
    this.view.mcpUi.onMessage(msg);
  }
  legacyPost(type, messageId, payload) {
    this.view.mcpUi.post(type, messageId, payload);
  }
}
