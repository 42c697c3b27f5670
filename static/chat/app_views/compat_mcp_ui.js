/* Legacy MCP-UI views: postMessage {type, messageId, payload}, translated into the same
 * requests as MCP Apps (tagged `_compat: "legacy"`). */

function legacyPost(type, messageId, payload) {
  var msg = { type: type, payload: payload || {} };
  if (messageId !== undefined) msg.messageId = messageId;
  this.post(msg);
}

function renderData() {
  var base = this.legacy && this.legacy.initialRenderData && typeof this.legacy.initialRenderData === "object" ? this.legacy.initialRenderData : {};
  var result = this.pendingResult;
  var ctx = this.hostContext();
  return Object.assign({}, base, {
    toolInput: this.toolInput || {},
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
function sendRenderData(always) {
  var renderData = this.renderData();
  var sent = JSON.stringify(renderData);
  if (!always && sent === this.renderDataSent) return;
  this.renderDataSent = sent;
  this.legacyPost("ui-lifecycle-iframe-render-data", undefined, { renderData: renderData });
}

function onLegacy(msg) {
  var self = this;
  var type = msg.type;
  var messageId = typeof msg.messageId === "string" || typeof msg.messageId === "number" ? msg.messageId : undefined;
  var payload = msg.payload && typeof msg.payload === "object" ? msg.payload : {};
  var ack = function () {
    if (messageId !== undefined) self.legacyPost("ui-message-received", messageId, { messageId: messageId });
  };
  var done = {
    ok: function (response) {
      if (messageId !== undefined) self.legacyPost("ui-message-response", messageId, { messageId: messageId, response: response });
    },
    fail: function (err) {
      if (messageId !== undefined) self.legacyPost("ui-message-response", messageId, { messageId: messageId, error: { code: err.code, message: err.message } });
    },
  };
  var relay = function (method, params) {
    ack();
    self.forward(method, params).then(done.ok, done.fail);
  };
  switch (type) {
    case "ui-lifecycle-iframe-ready":
      this.protocol = this.protocol || "legacy";
      if (this.protocol === "legacy" && !this.ready) {
        this.resultKey = this.pendingResult ? this.pendingResultKey() : null;
        this.markReady();
        this.sendRenderData(true);
      }
      return;
    case "ui-request-render-data":
      this.protocol = this.protocol || "legacy";
      ack();
      this.sendRenderData(true);
      return;
    case "ui-size-change":
      this.onSize(payload);
      this.notifyServer("ui/notifications/size-changed", { height: payload.height, width: payload.width, _compat: "legacy" }, true);
      return;
    case "tool":
      relay("tools/call", { name: String(payload.toolName || ""), arguments: payload.params && typeof payload.params === "object" ? payload.params : {}, _compat: "legacy" });
      return;
    case "prompt":
      ack();
      this.sendMessage(null, { role: "user", content: [{ type: "text", text: String(payload.prompt || "") }], _compat: "legacy" }, done);
      return;
    case "intent":
      var text = "Intent: " + String(payload.intent || "");
      if (payload.params !== undefined) {
        try {
          text += " " + JSON.stringify(payload.params);
        } catch (e) {
          /* unserializable params are left out */
        }
      }
      ack();
      this.sendMessage(null, { role: "user", content: [{ type: "text", text: text }], _compat: "legacy-intent" }, done);
      return;
    case "notify":
      ack();
      if (this.allowLog()) this.notifyServer("notifications/message", { level: "info", logger: "mcp-ui", data: payload.message, _compat: "legacy" });
      done.ok({});
      return;
    case "link":
      ack();
      this.openLink(null, { url: payload.url, _compat: "legacy" }, done);
      return;
    case "ui-request-data":
      ack();
      done.fail({ code: "not_supported", message: "ui-request-data is not supported by this host." });
      return;
    default:
      return;
  }
}

export const mcpUiCompatMethods = { legacyPost, renderData, sendRenderData, onLegacy };
