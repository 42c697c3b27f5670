/* Legacy MCP-UI views: postMessage {type, messageId, payload}, translated into the same
 * requests as MCP Apps (tagged `_compat: "legacy"`).
 * Uses its view's bridge (post, forward, notify the server), feed (input, result),
 * context (theme, locale, size), frame (size changes), cards (prompt, intent, link) and
 * lifecycle (ready). */

export class McpUiCompat {
  constructor(view) {
    this.view = view;
    this.legacy = null; // view.open's {preferredFrameSize, initialRenderData}
    this.renderDataSent = null;
  }

  post(type, messageId, payload) {
    const msg = { type, payload: payload || {} };
    if (messageId !== undefined) msg.messageId = messageId;
    this.view.bridge.post(msg);
  }

  renderData() {
    const { context, feed } = this.view;
    const base = this.legacy && this.legacy.initialRenderData && typeof this.legacy.initialRenderData === "object" ? this.legacy.initialRenderData : {};
    const result = feed.pendingResult;
    const ctx = context.current();
    return Object.assign({}, base, {
      toolInput: feed.toolInput || {},
      toolOutput: result && result.structuredContent !== undefined ? result.structuredContent : null,
      theme: ctx.theme,
      locale: ctx.locale,
      displayMode: ctx.displayMode,
      maxHeight: ctx.containerDimensions.maxHeight || ctx.containerDimensions.height,
    });
  }

  /* Render data when the view asks for it (`always`: ready, ui-request-render-data), else
   * only when it differs from what the view last got: a host-context change that leaves it
   * as it was (a resize at the same maxHeight) must not make a legacy view render again. */
  sendRenderData(always) {
    const renderData = this.renderData();
    const sent = JSON.stringify(renderData);
    if (!always && sent === this.renderDataSent) return;
    this.renderDataSent = sent;
    this.post("ui-lifecycle-iframe-render-data", undefined, { renderData });
  }

  onMessage(msg) {
    const { bridge, cards, feed, frame, lifecycle } = this.view;
    const type = msg.type;
    const messageId = typeof msg.messageId === "string" || typeof msg.messageId === "number" ? msg.messageId : undefined;
    const payload = msg.payload && typeof msg.payload === "object" ? msg.payload : {};
    const ack = () => {
      if (messageId !== undefined) this.post("ui-message-received", messageId, { messageId });
    };
    const done = {
      ok: (response) => {
        if (messageId !== undefined) this.post("ui-message-response", messageId, { messageId, response });
      },
      fail: (err) => {
        if (messageId !== undefined) this.post("ui-message-response", messageId, { messageId, error: { code: err.code, message: err.message } });
      },
    };
    const relay = (method, params) => {
      ack();
      bridge.forward(method, params).then(done.ok, done.fail);
    };
    switch (type) {
      case "ui-lifecycle-iframe-ready":
        bridge.protocol = bridge.protocol || "legacy";
        if (bridge.protocol === "legacy" && !bridge.ready) {
          feed.resultShown();
          lifecycle.markReady();
          this.sendRenderData(true);
        }
        return;
      case "ui-request-render-data":
        bridge.protocol = bridge.protocol || "legacy";
        ack();
        this.sendRenderData(true);
        return;
      case "ui-size-change":
        frame.onSize(payload);
        bridge.notifyServer("ui/notifications/size-changed", { height: payload.height, width: payload.width, _compat: "legacy" }, true);
        return;
      case "tool":
        relay("tools/call", { name: String(payload.toolName || ""), arguments: payload.params && typeof payload.params === "object" ? payload.params : {}, _compat: "legacy" });
        return;
      case "prompt":
        ack();
        cards.sendMessage(null, { role: "user", content: [{ type: "text", text: String(payload.prompt || "") }], _compat: "legacy" }, done);
        return;
      case "intent": {
        let text = "Intent: " + String(payload.intent || "");
        if (payload.params !== undefined) {
          try {
            text += " " + JSON.stringify(payload.params);
          } catch (e) {
            /* unserializable params are left out */
          }
        }
        ack();
        cards.sendMessage(null, { role: "user", content: [{ type: "text", text }], _compat: "legacy-intent" }, done);
        return;
      }
      case "notify":
        ack();
        if (bridge.allowLog()) bridge.notifyServer("notifications/message", { level: "info", logger: "mcp-ui", data: payload.message, _compat: "legacy" });
        done.ok({});
        return;
      case "link":
        ack();
        cards.openLink(null, { url: payload.url, _compat: "legacy" }, done);
        return;
      case "ui-request-data":
        ack();
        done.fail({ code: "not_supported", message: "ui-request-data is not supported by this host." });
        return;
      default:
        return;
    }
  }
}
