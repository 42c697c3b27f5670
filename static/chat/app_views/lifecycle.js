/* An app view's lifecycle: tool input, partial input, result or cancellation, teardown. */
import { h, icon } from "../dom.js";
import { FINAL, TEARDOWN_WAIT_MS } from "./config.js";
import { liveAppViews, nextHostRequestId } from "./registry.js";
import { callToolResult } from "./tool_result.js";

function markReady() {
  if (this.ready) return;
  this.ready = true;
  this.renderModeButtons();
  if (this.protocol === "mcp" && this.lastContext) this.contextChanged(); // changes since initialize
  this.sync();
}

/** Send whatever the view is owed: tool-input once, then the result or the cancellation. */
function sync() {
  if (!this.ready || !this.frame) return;
  if (this.protocol === "legacy") {
    if (this.pendingResult && this.resultKey !== this.pendingResultKey()) {
      this.resultKey = this.pendingResultKey();
      this.sendRenderData();
    }
    return;
  }
  if (!this.inputSent) {
    if (this.awaitingFinalInput) {
      if (this.cancelReason !== undefined) {
        // Ended before its arguments were complete: no tool-input, only the cancellation.
        if (!this.cancelSent) {
          this.cancelSent = true;
          this.post({ jsonrpc: "2.0", method: "ui/notifications/tool-cancelled", params: this.cancelReason ? { reason: this.cancelReason } : {} });
        }
        return;
      }
      if (this.partial && this.partialSent !== this.partial) {
        this.partialSent = this.partial;
        this.post({ jsonrpc: "2.0", method: "ui/notifications/tool-input-partial", params: { arguments: this.partial } });
      }
      return;
    }
    this.inputSent = true;
    this.post({ jsonrpc: "2.0", method: "ui/notifications/tool-input", params: { arguments: this.toolInput || {} } });
  }
  if (this.pendingResult) {
    var key = this.pendingResultKey();
    if (this.resultKey !== key) {
      this.resultKey = key;
      this.post({ jsonrpc: "2.0", method: "ui/notifications/tool-result", params: this.pendingResult });
    }
  } else if (this.cancelReason !== undefined && !this.cancelSent) {
    this.cancelSent = true;
    this.post({ jsonrpc: "2.0", method: "ui/notifications/tool-cancelled", params: this.cancelReason ? { reason: this.cancelReason } : {} });
  }
}

function pendingResultKey() {
  try {
    return JSON.stringify(this.pendingResult).length + ":" + (this.finishedAt || "");
  } catch (e) {
    return String(Date.now());
  }
}

/** Take what matters from a tool call payload (event or update). */
function absorb(call) {
  if (!call || call.id !== this.id) return;
  this.call = call;
  this.status = call.status;
  this.finishedAt = call.finishedAt;
  if (FINAL.indexOf(call.status) < 0) return;
  if ((call.status === "success" || call.status === "error") && call.result) {
    this.pendingResult = callToolResult(call.result);
  } else {
    // No result: rejected, expired, cancelled, or the server failed (unreachable,
    // crashed, timed out, refused the arguments) — the view is told it was cancelled.
    var fallback = call.status === "rejected" ? "The call was rejected." : call.status === "error" ? "The tool call failed." : "The call was cancelled.";
    this.cancelReason = (call.error && call.error.message) || fallback;
  }
}

function onCall(call) {
  if (!call || call.id !== this.id || this.closed) return;
  var before = this.pendingResult;
  if (this.awaitingFinalInput && call.status !== "streaming" && call.status !== "cancelled" && call.arguments && typeof call.arguments === "object") {
    // The arguments are complete (the call was decided): tool-input follows the partials.
    this.awaitingFinalInput = false;
    this.toolInput = call.arguments;
  }
  if (FINAL.indexOf(call.status) >= 0 && !(before && this.finishedAt === call.finishedAt)) this.absorb(call);
  else {
    this.call = call;
    this.status = call.status;
  }
  if (this.appSdk && this.ready && call.widgetState !== undefined) this.receiveWidgetState(call.widgetState);
  this.sync();
}

function onPartial(data) {
  if (!data || data.id !== this.id || this.inputSent || this.closed) return;
  if (!data.arguments || typeof data.arguments !== "object") return;
  this.awaitingFinalInput = true;
  this.partial = data.arguments;
  if (this.ready && this.protocol === "mcp") {
    this.partialSent = data.arguments;
    this.post({ jsonrpc: "2.0", method: "ui/notifications/tool-input-partial", params: { arguments: data.arguments } });
  }
}

/** ui/resource-teardown, waiting at most 3 s for the view's answer. */
function teardown(reason) {
  var self = this;
  if (!this.frame || !this.ready || this.protocol !== "mcp") return Promise.resolve();
  return new Promise(function (resolve) {
    var id = nextHostRequestId();
    var timer = setTimeout(function () {
      delete self.hostPending[id];
      resolve();
    }, TEARDOWN_WAIT_MS);
    self.hostPending[id] = function () {
      clearTimeout(timer);
      resolve();
    };
    self.post({ jsonrpc: "2.0", id: id, method: "ui/resource-teardown", params: { reason: reason || "unmount" } });
  });
}

function destroy(reason) {
  var self = this;
  if (this.closed) return Promise.resolve();
  this.closed = true;
  if (this.observer) this.observer.unobserve(this.container);
  if (this.modalView) this.modalView.dialog.close();
  return this.teardown(reason).then(function () {
    clearTimeout(self.readyTimer);
    clearTimeout(self.sizeNotifyTimer);
    self.removeFrame();
    var i = liveAppViews.indexOf(self);
    if (i >= 0) liveAppViews.splice(i, 1);
  });
}

/** The app asked to be closed (request-teardown / Apps SDK requestClose). */
function honourTeardown() {
  var self = this;
  if (this.modal) {
    if (this.dialog && this.dialog.open) this.dialog.close();
    return;
  }
  if (this.closing) return;
  this.closing = true;
  this.teardown("closed by the app").then(function () {
    self.closing = false;
    self.removeFrame();
    self.phase = "closed";
    self.reset();
    self.slot.textContent = "";
    self.slot.appendChild(
      h(
        "div",
        { class: "view-closed" },
        h("span", { text: self.appName() + " closed this view." }),
        h(
          "button",
          {
            class: "btn btn-sm",
            attrs: { type: "button" },
            on: {
              click: function () {
                self.phase = "idle";
                self.showLoading();
                self.open();
              },
            },
          },
          icon("reload", "view-icon"),
          "Reopen"
        )
      )
    );
  });
}

/** Tear the frame down (the view is told first) and open it again: a new token, the new
 *  iframe `allow`, and the lifecycle replayed from where the call stands. */
function remount(reason) {
  var self = this;
  return this.teardown(reason).then(function () {
    clearTimeout(self.readyTimer);
    clearTimeout(self.sizeNotifyTimer);
    self.removeFrame();
    self.reset();
    self.cancelReason = undefined;
    self.pendingResult = null;
    self.phase = "idle";
    self.showLoading();
    self.open();
  });
}

export const lifecycleMethods = { markReady, sync, pendingResultKey, absorb, onCall, onPartial, teardown, destroy, honourTeardown, remount };
