/* Apps SDK (window.openai) extras: the shim's first globals, widget state, and
 * requestModal, which opens the same app view again in a host dialog.
 * Uses its view's bridge (ask the server, answer the app) and feed (input and result);
 * `openView(container, call, client, options)` makes the dialog's own app view. */
import { h } from "../dom.js";
import { iconButton } from "./display_modes.js";
import { liveAppViews } from "./registry.js";
import { rpcError, same } from "./rpc.js";

export class OpenAiCompat {
  constructor(view, { openView }) {
    this.view = view;
    this.openView = openView;
    this.widgetState = null;
    this.widgetWrites = []; // our setWidgetState values not yet seen back from the server
    this.widgetStateChain = null;
    this.modalView = null;
  }

  /** Per document: no write of ours is awaited any more. */
  reset() {
    this.widgetWrites = [];
  }

  /** window.openai's first values, sent with the document (sandbox-resource-ready). */
  initialGlobals(ctx) {
    const { feed, modal } = this.view;
    const result = feed.pendingResult;
    return {
      toolInput: feed.toolInput,
      toolOutput: result && result.structuredContent !== undefined ? result.structuredContent : null,
      toolResponseMetadata: result && result._meta ? result._meta : null,
      widgetState: this.widgetState,
      theme: ctx.theme,
      locale: ctx.locale,
      displayMode: ctx.displayMode,
      maxHeight: ctx.containerDimensions.maxHeight || ctx.containerDimensions.height,
      safeArea: { insets: { top: 0, bottom: 0, left: 0, right: 0 } },
      userAgent: { device: { type: ctx.deviceCapabilities.touch && !ctx.deviceCapabilities.hover ? "mobile" : "desktop" }, capabilities: ctx.deviceCapabilities },
      view: modal ? { mode: "modal", params: modal.params === undefined ? null : modal.params } : { mode: "inline", params: null },
    };
  }

  /** Apps SDK requestModal: the same view, opened again in a host dialog — once the server
   *  allowed it (decided and audited like every view request). The host chrome names the app
   *  (its server's name); the app's own title is shown only as its text, never as ours. */
  openModal(id, params) {
    const { bridge } = this.view;
    if (this.view.modal) {
      bridge.respondError(id, { code: -32000, message: "A modal cannot open another modal.", data: { reason: "nested_modal" } });
      return;
    }
    bridge.forward("openai/requestModal", { title: typeof params.title === "string" ? params.title : "" }).then(
      (allowed) => {
        if (this.view.closed) return;
        this.showModal(id, params, allowed || {});
      },
      (err) => bridge.respondError(id, rpcError(err))
    );
  }

  showModal(id, params, allowed) {
    const view = this.view;
    this.closeModal();
    const appName = typeof allowed.appName === "string" && allowed.appName ? allowed.appName : view.appName();
    const appTitle = typeof allowed.title === "string" ? allowed.title : "";
    const body = h("div", { class: "view-modal-body", attrs: { "data-slot": "frame" } });
    const close = iconButton("close", "Close", () => dialog.close());
    const heading = h(
      "div",
      { class: "view-modal-title" },
      h("strong", { class: "view-modal-app", text: appName }),
      appTitle ? h("span", { class: "view-modal-app-title", attrs: { title: "Text from " + appName }, text: appTitle }) : null
    );
    const dialog = h("dialog", { class: "view-modal", attrs: { "aria-label": appName + (appTitle ? ": " + appTitle : "") } }, h("div", { class: "view-modal-head" }, heading, h("span", { class: "view-spacer" }), close), body);
    document.body.appendChild(dialog);
    const child = this.openView(dialog, view.feed.call, view.client, { modal: { title: appName, params: params.params, parent: view, dialog } });
    this.modalView = child;
    liveAppViews.push(child);
    dialog.addEventListener("close", () => {
      if (this.modalView === child) this.modalView = null;
      child.destroy("modal closed").then(() => {
        if (dialog.parentNode) dialog.parentNode.removeChild(dialog);
      });
    });
    try {
      dialog.showModal();
    } catch (e) {
      dialog.setAttribute("open", "");
    }
    child.start();
    view.bridge.respond(id, {});
  }

  /** Apps SDK setOpenInAppUrl({href}): once the server allowed it (https only, then the
   *  binding's link policy; audited), the view's host bar gets "Open in <app>" — a plain
   *  link the person clicks (their gesture opens it; the full URL is its tooltip). A later
   *  call replaces it. */
  setOpenInAppUrl(id, params) {
    const { bridge } = this.view;
    const href = typeof params.href === "string" ? params.href : "";
    bridge.forward("openai/setOpenInAppUrl", Object.assign({}, params, { href })).then(
      (result) => {
        if (!this.view.closed) this.showOpenInApp(href);
        bridge.respond(id, result || {});
      },
      (err) => bridge.respondError(id, rpcError(err))
    );
  }

  /** The link in the view's header (inline) and in its stage bar (full screen, pip, pane):
   *  both host chrome, next to the display-mode buttons. */
  showOpenInApp(href) {
    const { frame, modes } = this.view;
    const name = this.view.appName();
    const spots = [
      [modes.slot && modes.slot.parentNode, modes.slot],
      [frame.stageButtons && frame.stageButtons.parentNode, frame.stageButtons],
    ];
    for (const [bar, before] of spots) {
      if (!bar) continue;
      const old = bar.querySelector(":scope > .view-open-in-app");
      if (old) old.remove();
      const link = h("a", {
        class: "btn btn-sm btn-secondary view-open-in-app",
        text: "Open in " + name,
        attrs: { href, target: "_blank", rel: "noopener noreferrer", title: href, "aria-label": "Open in " + name + ": " + href },
      });
      bar.insertBefore(link, before);
    }
  }

  /** The dialog this view opened (if any) closes; its view is destroyed on close. */
  closeModal() {
    if (this.modalView) this.modalView.modal.dialog.close();
  }

  /** Apps SDK setWidgetState: one write at a time, in the order the app made them, so the
   *  server stores (and every member ends at) the app's latest state. */
  setWidgetState(id, params) {
    const { bridge } = this.view;
    const state = params.state === undefined ? null : params.state;
    this.widgetState = state;
    this.widgetWrites.push(state);
    const writes = this.widgetWrites;
    const forget = () => {
      const i = writes.indexOf(state);
      if (i >= 0) writes.splice(i, 1);
    };
    this.widgetStateChain = (this.widgetStateChain || Promise.resolve()).then(() =>
      bridge.forward("atrium/setWidgetState", params).then(
        (result) => bridge.respond(id, result),
        (err) => {
          forget();
          bridge.respondError(id, rpcError(err));
        }
      )
    );
  }

  /** The widget state a toolcall event carries. The echo of our own older write (or an event
   *  that left before our newer write landed) is not applied: it would take the view back. */
  receiveWidgetState(state) {
    const writes = this.widgetWrites;
    const echoed = writes.findIndex((w) => same(w, state));
    if (echoed >= 0) writes.splice(0, echoed + 1);
    if (writes.length || same(state, this.widgetState)) return;
    // Set by another member (or by the server's own ordering): the view follows it.
    this.widgetState = state;
    this.view.bridge.post({ jsonrpc: "2.0", method: "atrium/notifications/widget-state", params: { state } });
  }
}
