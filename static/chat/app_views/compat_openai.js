/* Apps SDK (window.openai) extras: requestModal opens the same app view in a host dialog. */
import { h } from "../dom.js";
import { AppView } from "./app_view.js";
import { iconButton } from "./display_modes.js";
import { liveAppViews } from "./registry.js";
import { rpcError, same } from "./rpc.js";

/** Apps SDK requestModal: the same view, opened again in a host dialog — once the server
 *  allowed it (decided and audited like every view request). The host chrome names the app
 *  (its server's name); the app's own title is shown only as its text, never as ours. */
function openModal(id, params) {
  var self = this;
  if (this.modal) {
    this.respondError(id, { code: -32000, message: "A modal cannot open another modal.", data: { reason: "nested_modal" } });
    return;
  }
  this.forward("openai/requestModal", { title: typeof params.title === "string" ? params.title : "" }).then(
    function (allowed) {
      if (self.closed) return;
      self.showModal(id, params, allowed || {});
    },
    function (err) {
      self.respondError(id, rpcError(err));
    }
  );
}

function showModal(id, params, allowed) {
  var self = this;
  if (this.modalView) this.modalView.dialog.close();
  var appName = typeof allowed.appName === "string" && allowed.appName ? allowed.appName : this.appName();
  var appTitle = typeof allowed.title === "string" ? allowed.title : "";
  var title = appName;
  var body = h("div", { class: "view-modal-body", attrs: { "data-slot": "frame" } });
  var close = iconButton("close", "Close", function () {
    dialog.close();
  });
  var heading = h(
    "div",
    { class: "view-modal-title" },
    h("strong", { class: "view-modal-app", text: appName }),
    appTitle ? h("span", { class: "view-modal-app-title", attrs: { title: "Text from " + appName }, text: appTitle }) : null
  );
  var dialog = h("dialog", { class: "view-modal", attrs: { "aria-label": appName + (appTitle ? ": " + appTitle : "") } }, h("div", { class: "view-modal-head" }, heading, h("span", { class: "view-spacer" }), close), body);
  document.body.appendChild(dialog);
  var child = new AppView(dialog, this.call, this.client, { modal: { title: title, params: params.params, parent: this } });
  child.dialog = dialog;
  this.modalView = child;
  liveAppViews.push(child);
  dialog.addEventListener("close", function () {
    if (self.modalView === child) self.modalView = null;
    child.destroy("modal closed").then(function () {
      if (dialog.parentNode) dialog.parentNode.removeChild(dialog);
    });
  });
  try {
    dialog.showModal();
  } catch (e) {
    dialog.setAttribute("open", "");
  }
  child.start();
  this.respond(id, {});
}

/** Apps SDK setWidgetState: one write at a time, in the order the app made them, so the
 *  server stores (and every member ends at) the app's latest state. */
function setWidgetState(id, params) {
  var self = this;
  var state = params.state === undefined ? null : params.state;
  this.widgetState = state;
  this.widgetWrites.push(state);
  var writes = this.widgetWrites;
  var forget = function () {
    var i = writes.indexOf(state);
    if (i >= 0) writes.splice(i, 1);
  };
  this.widgetStateChain = (this.widgetStateChain || Promise.resolve()).then(function () {
    return self.forward("atrium/setWidgetState", params).then(
      function (result) {
        self.respond(id, result);
      },
      function (err) {
        forget();
        self.respondError(id, rpcError(err));
      }
    );
  });
}

/** The widget state a toolcall event carries. The echo of our own older write (or an event
 *  that left before our newer write landed) is not applied: it would take the view back. */
function receiveWidgetState(state) {
  var writes = this.widgetWrites;
  var echoed = -1;
  for (var i = 0; i < writes.length; i++) {
    if (same(writes[i], state)) {
      echoed = i;
      break;
    }
  }
  if (echoed >= 0) writes.splice(0, echoed + 1);
  if (writes.length || same(state, this.widgetState)) return;
  // Set by another member (or by the server's own ordering): the view follows it.
  this.widgetState = state;
  this.post({ jsonrpc: "2.0", method: "atrium/notifications/widget-state", params: { state: state } });
}

export const openaiCompatMethods = { openModal, showModal, setWidgetState, receiveWidgetState };
