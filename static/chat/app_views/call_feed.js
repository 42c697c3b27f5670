/* What an app view is owed of its tool call (docs/view-bridge.md §6): partial input while
 * the model streams, tool-input once, then the result or the cancellation — in that
 * order, nothing before the view is ready, each once per document.
 * Uses its view's bridge (ready? protocol, post), mcpUi (a legacy view gets render data)
 * and openai (widget state a toolcall event carries). */
import { FINAL } from "./config.js";
import { callToolResult } from "./tool_result.js";

export class CallFeed {
  constructor(view, call) {
    this.view = view;
    this.call = call;
    this.status = call.status;
    this.finishedAt = call.finishedAt;
    this.toolInput = null;
    this.pendingResult = null;
    this.cancelReason = undefined;
    this.reset();
  }

  /** Per document: nothing sent yet. */
  reset() {
    this.inputSent = false;
    this.resultKey = null;
    this.cancelSent = false;
    this.partial = null;
    this.partialSent = null;
    this.awaitingFinalInput = false;
  }

  /** Before a remount: the call's outcome is read again from view.open. */
  forgetOutcome() {
    this.cancelReason = undefined;
    this.pendingResult = null;
  }

  /** Where the call stands, from the view.open reply. */
  opened(reply) {
    this.toolInput = reply.toolInput && typeof reply.toolInput === "object" ? reply.toolInput : this.call.arguments || {};
    this.pendingResult = reply.toolResult || null;
    this.status = reply.status || this.call.status;
    this.finishedAt = this.call.finishedAt;
    if (this.status === "streaming") {
      // The model is still writing the arguments: what is stored so far is partial.
      this.awaitingFinalInput = true;
      if (!this.partial && reply.toolInput && Object.keys(reply.toolInput).length) this.partial = reply.toolInput;
      this.toolInput = null;
    }
    if (!this.pendingResult) this.absorb(this.call); // an event may have come first
  }

  /** Send whatever the view is owed: tool-input once, then the result or the cancellation. */
  sync() {
    const { bridge, frame, mcpUi } = this.view;
    if (!bridge.ready || !frame.iframe) return;
    if (bridge.protocol === "legacy") {
      if (this.pendingResult && this.resultKey !== this.currentResultKey()) {
        this.resultKey = this.currentResultKey();
        mcpUi.sendRenderData();
      }
      return;
    }
    if (!this.inputSent) {
      if (this.awaitingFinalInput) {
        if (this.cancelReason !== undefined) {
          // Ended before its arguments were complete: no tool-input, only the cancellation.
          this.sendCancelled();
          return;
        }
        if (this.partial && this.partialSent !== this.partial) {
          this.partialSent = this.partial;
          bridge.post({ jsonrpc: "2.0", method: "ui/notifications/tool-input-partial", params: { arguments: this.partial } });
        }
        return;
      }
      this.inputSent = true;
      bridge.post({ jsonrpc: "2.0", method: "ui/notifications/tool-input", params: { arguments: this.toolInput || {} } });
    }
    if (this.pendingResult) {
      const key = this.currentResultKey();
      if (this.resultKey !== key) {
        this.resultKey = key;
        bridge.post({ jsonrpc: "2.0", method: "ui/notifications/tool-result", params: this.pendingResult });
      }
    } else if (this.cancelReason !== undefined) {
      this.sendCancelled();
    }
  }

  sendCancelled() {
    if (this.cancelSent) return;
    this.cancelSent = true;
    this.view.bridge.post({ jsonrpc: "2.0", method: "ui/notifications/tool-cancelled", params: this.cancelReason ? { reason: this.cancelReason } : {} });
  }

  currentResultKey() {
    try {
      return JSON.stringify(this.pendingResult).length + ":" + (this.finishedAt || "");
    } catch (e) {
      return String(Date.now());
    }
  }

  /** A legacy view rendered what it has when it said it was ready: that result is sent. */
  resultShown() {
    this.resultKey = this.pendingResult ? this.currentResultKey() : null;
  }

  /** Take what matters from a tool call payload (event or update). */
  absorb(call) {
    if (!call || call.id !== this.view.id) return;
    this.call = call;
    this.status = call.status;
    this.finishedAt = call.finishedAt;
    if (FINAL.indexOf(call.status) < 0) return;
    if ((call.status === "success" || call.status === "error") && call.result) {
      this.pendingResult = callToolResult(call.result);
    } else {
      // No result: rejected, expired, cancelled, or the server failed (unreachable,
      // crashed, timed out, refused the arguments) — the view is told it was cancelled.
      const fallback = call.status === "rejected" ? "The call was rejected." : call.status === "error" ? "The tool call failed." : "The call was cancelled.";
      this.cancelReason = (call.error && call.error.message) || fallback;
    }
  }

  /** A toolcall event for this call. */
  onCall(call) {
    const view = this.view;
    if (!call || call.id !== view.id || view.closed) return;
    const before = this.pendingResult;
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
    if (view.lifecycle.appSdk && view.bridge.ready && call.widgetState !== undefined) view.openai.receiveWidgetState(call.widgetState);
    this.sync();
  }

  /** A toolcall.input-partial event: the model's arguments so far. */
  onPartial(data) {
    const { bridge } = this.view;
    if (!data || data.id !== this.view.id || this.inputSent || this.view.closed) return;
    if (!data.arguments || typeof data.arguments !== "object") return;
    this.awaitingFinalInput = true;
    this.partial = data.arguments;
    if (bridge.ready && bridge.protocol === "mcp") {
      this.partialSent = data.arguments;
      bridge.post({ jsonrpc: "2.0", method: "ui/notifications/tool-input-partial", params: { arguments: data.arguments } });
    }
  }
}
