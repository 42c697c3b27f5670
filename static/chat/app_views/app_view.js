/* One app view: a tool call's view in its row (or in the dialog of an Apps SDK modal).
 *
 * An AppView is its identity (the call, the thread client, its container) and the
 * collaborators below, each owning its own state; this constructor is the one place they
 * are wired. frame and bridge are given exactly what they use; the others reach their
 * peers only through these names on their view:
 *
 *   frame      frame.js         the stage and iframe, loading/failure cards, inline height,
 *                               the notice line under the frame
 *   bridge     host_bridge.js   JSON-RPC with the view, token, origin, protocol; the host
 *                               steps of methods.js's rows
 *   lifecycle  lifecycle.js     view.open → frame → handshake → live; teardown, remount
 *   feed       call_feed.js     the call's input, partial input, result or cancellation
 *   context    host_context.js  hostContext and its changes
 *   modes      display_modes.js inline / pip / full screen
 *   cards      host_cards.js    the person's say: message, link, display-mode cards
 *   openai     compat_openai.js Apps SDK: first globals, widget state, requestModal
 *   mcpUi      compat_mcp_ui.js legacy MCP-UI messages
 */
import { CallFeed } from "./call_feed.js";
import { McpUiCompat } from "./compat_mcp_ui.js";
import { OpenAiCompat } from "./compat_openai.js";
import { DisplayModes } from "./display_modes.js";
import { ViewFrame } from "./frame.js";
import { HostBridge } from "./host_bridge.js";
import { HostCards } from "./host_cards.js";
import { HostContext } from "./host_context.js";
import { Lifecycle } from "./lifecycle.js";

export class AppView {
  /** `options.modal`: {title, params, parent, dialog} for an Apps SDK modal's view. */
  constructor(container, call, client, options = {}) {
    this.container = container;
    this.id = call.id;
    this.client = client;
    this.modal = options.modal || null;
    this.closed = false;

    this.frame = new ViewFrame({
      slot: container.querySelector('[data-slot="frame"]') || container,
      isInline: () => this.modes.mode === "inline",
      onResized: () => this.context.changed(),
      appName: () => this.appName(),
    });
    this.feed = new CallFeed(this, call);
    this.lifecycle = new Lifecycle(this);
    this.context = new HostContext(this);
    this.modes = new DisplayModes(this);
    this.cards = new HostCards(this);
    this.openai = new OpenAiCompat(this, { openView: (dialog, dialogCall, dialogClient, dialogOptions) => new AppView(dialog, dialogCall, dialogClient, dialogOptions) });
    this.mcpUi = new McpUiCompat(this);
    // Last: it is handed its peers themselves.
    this.bridge = new HostBridge({
      id: this.id,
      client,
      isClosed: () => this.closed,
      appName: () => this.appName(),
      frame: this.frame,
      lifecycle: this.lifecycle,
      context: this.context,
      modes: this.modes,
      cards: this.cards,
      openai: this.openai,
      mcpUi: this.mcpUi,
    });
  }

  /** The server's display name for this view's app. */
  appName() {
    const reply = this.lifecycle.reply;
    const call = this.feed.call;
    return (reply && reply.appName) || (call.server && (call.server.name || call.server.slug)) || "App";
  }

  // ---- what the page does with a view (index.js) -------------------------------------------

  start() {
    this.lifecycle.start();
  }

  /** Torn down (ui/resource-teardown first, ≤ 3 s) and removed. */
  destroy(reason) {
    return this.lifecycle.destroy(reason);
  }

  onCall(call) {
    this.feed.onCall(call);
  }

  onPartial(data) {
    this.feed.onPartial(data);
  }

  setMode(mode, source) {
    return this.modes.setMode(mode, source);
  }

  contextChanged() {
    this.context.changed();
  }

  /** A message posted to this page: this view's when it comes from its frame's window,
   *  and then only from its sandbox origin. */
  receive(event) {
    const source = this.frame.window();
    if (!source || event.source !== source) return false;
    if (event.origin === this.bridge.origin) this.bridge.onMessage(event.data);
    return true;
  }

  /** The page closes: an MCP view is told (nothing is awaited). */
  pageClosing() {
    if (this.bridge.ready && this.bridge.protocol === "mcp") this.bridge.post({ jsonrpc: "2.0", id: "atrium-host:pagehide", method: "ui/resource-teardown", params: { reason: "page closed" } });
  }

  /** For tests and debugging (window.AtriumAppViews.list()). */
  summary() {
    return { toolCallId: this.id, phase: this.lifecycle.phase, ready: this.bridge.ready, protocol: this.bridge.protocol, mode: this.modes.mode, displayMode: this.modes.reported(), height: this.frame.height, flavor: this.lifecycle.flavor, modal: !!this.modal };
  }
}
