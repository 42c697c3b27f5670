/* An app view's lifecycle: lazy open (view.open), the frame on the server's sandbox
 * origin, the proxy handshake, failure, teardown, reopen and remount.
 *
 *   idle → opening → loading → live | failed | closed
 *
 * Owns the view.open reply (token and origin go to the bridge). Uses every collaborator
 * of its view: it builds the frame, resets each per document, and tears them down. */
import { h, icon } from "../dom.js";
import { INNER_SANDBOX, MAX_HEIGHT, MIN_HEIGHT, PROXY_READY_TIMEOUT_MS, TEARDOWN_WAIT_MS } from "./config.js";
import { cspDomains, currentTheme, permissionObject } from "./host_context.js";
import { openWhenNear } from "./lazy_open.js";
import { permissionPrompt } from "./permissions.js";
import { remoteDomDocument } from "./remote_dom.js";
import { liveAppViews, nextHostRequestId } from "./registry.js";
import { clamp, normalizeError, originOf, request } from "./rpc.js";
import { sidePane } from "./side_pane.js";

// Errors a retry cannot fix: no "Try again" button.
const FINAL_ERRORS = ["not_found", "no_view", "view_not_supported", "view_too_large", "forbidden", "scope_mismatch", "binding_disabled", "no_binding", "sandbox_misconfigured"];

const documents = new Map(); // document path (content hash) → Promise<html>

function fetchDocument(url) {
  let key;
  try {
    key = new URL(url, window.location.href).pathname; // content-hash URL: immutable
  } catch (e) {
    key = url;
  }
  if (documents.has(key)) return documents.get(key);
  const promise = fetch(url, { credentials: "same-origin", cache: "force-cache" }).then((response) => {
    if (!response.ok) throw new Error("HTTP " + response.status);
    return response.text();
  });
  documents.set(key, promise);
  promise.catch(() => documents.delete(key));
  return promise;
}

export class Lifecycle {
  constructor(view) {
    this.view = view;
    this.phase = "idle";
    this.reply = null; // view.open's answer
    this.flavor = null;
    this.appSdk = false;
    this.resourceSent = false;
    this.readyTimer = null;
    this.observer = null; // lazy open
    this.closing = false;
  }

  /** A fresh document: every collaborator forgets what the last one was told. */
  reset() {
    const view = this.view;
    // A host card answers a request of the document being replaced: it goes with it.
    view.cards.closeAll();
    this.resourceSent = false;
    view.bridge.reset();
    view.feed.reset();
    view.context.last = null;
    view.frame.resetSizing();
    view.openai.reset();
  }

  start() {
    const view = this.view;
    view.frame.showLoading();
    if (view.modal || view.modes.mode === "split") {
      this.open(); // a pinned view is on screen in its pane: no lazy open
      return;
    }
    let tries = 0;
    const wait = () => {
      if (this.phase !== "idle") return;
      if (view.container.isConnected) {
        this.observer = openWhenNear(view);
        return;
      }
      if (++tries < 120) requestAnimationFrame(wait);
      else this.observer = openWhenNear(view);
    };
    wait();
  }

  open() {
    if (this.phase !== "idle" && this.phase !== "failed") return;
    this.phase = "opening";
    request(this.view.client, { type: "view.open", toolCallId: this.view.id }).then(
      (reply) => {
        if (this.phase === "opening") this.build(reply || {});
      },
      (err) => {
        if (this.phase === "opening") this.fail(err);
      }
    );
  }

  build(reply) {
    const view = this.view;
    const { bridge, feed, frame } = view;
    const origin = reply.sandboxOrigin || originOf(reply.sandboxUrl);
    if (!origin || originOf(reply.sandboxUrl) !== origin || origin === window.location.origin || origin === "null") {
      // Never run a view in the app's own origin (security invariant 1).
      this.fail({ code: "sandbox_misconfigured", message: "The sandbox origin is not separate from this site, so the view is not shown." });
      return;
    }
    this.reply = reply;
    bridge.token = reply.token;
    bridge.origin = origin;
    this.flavor = reply.flavor || (feed.call.view && feed.call.view.flavor) || "mcp-app";
    this.appSdk = reply.appSdk === true;
    const legacy = reply.legacy && typeof reply.legacy === "object" ? reply.legacy : null;
    view.mcpUi.legacy = legacy;
    view.openai.widgetState = reply.widgetState === undefined ? null : reply.widgetState;
    feed.opened(reply);
    const preferred = legacy && Array.isArray(legacy.preferredFrameSize) ? parseInt(legacy.preferredFrameSize[1], 10) : NaN;
    if (isFinite(preferred) && /px$|^\d+$/.test(String(legacy.preferredFrameSize[1]).trim())) frame.height = clamp(preferred, MIN_HEIGHT, MAX_HEIGHT);

    this.phase = "loading";
    const name = view.appName();
    frame.build({
      title: view.modal ? view.modal.title || name : name,
      frameTitle: name + " view" + (feed.call.tool ? " (" + feed.call.tool + ")" : ""),
      allow: reply.allow,
      prompt: view.modal ? null : permissionPrompt(reply.permissionRequest, { id: view.id, appName: name, client: view.client, onGranted: () => this.remount("permissions changed") }),
      modal: !!view.modal,
    });
    if (view.modes.mode === "split") view.modes.apply("split", true); // pinned: into its pane
    view.modes.renderButtons();
    sidePane.stageChanged(view);
    frame.watchSize();
    // The message listener is global and already attached; the frame is known to it from
    // here on, before its src is set (pitfall 3).
    // Fetched while the proxy page loads (cached by content hash): the handshake then
    // answers proxy-ready without another round trip.
    if (this.flavor !== "url" && reply.documentUrl) fetchDocument(reply.documentUrl).catch(() => {});
    // The proxy document starts in the host's theme (its color-scheme; docs/sandbox.md).
    frame.load(reply.sandboxUrl + (reply.sandboxUrl.indexOf("?") < 0 ? "?" : "&") + "theme=" + currentTheme());
    this.readyTimer = setTimeout(() => {
      if (!this.resourceSent && this.phase === "loading") this.fail({ code: "sandbox_timeout", message: "The view's sandbox did not load." });
    }, PROXY_READY_TIMEOUT_MS);
  }

  fail(err) {
    const view = this.view;
    err = err && err.code ? err : normalizeError(err);
    this.phase = "failed";
    this.removeFrame();
    clearTimeout(this.readyTimer);
    const unsupported = err.code === "view_not_supported";
    const retryable = FINAL_ERRORS.indexOf(err.code) < 0;
    const text = view.feed.call.textFallback || ""; // the server's (chat/presenters.py)
    const retry = () => {
      this.reset();
      this.phase = "idle";
      view.frame.showLoading();
      this.open();
    };
    const card = h(
      "div",
      { class: "view-fallback" + (unsupported ? " is-unsupported" : " is-error"), attrs: { role: "note" } },
      h("div", { class: "view-fallback-head" }, icon("alert", "view-icon"), h("strong", { text: unsupported ? "This view type is not supported" : err.code === "view_too_large" ? "This app's page is too large" : "The view could not be shown" })),
      h("p", { class: "view-fallback-reason", text: err.message || "Unknown error." }),
      err.code ? h("code", { class: "view-fallback-code", text: err.code }) : null,
      text ? h("div", { class: "view-fallback-label", text: "Text result" }) : null,
      text ? h("div", { class: "view-fallback-text text-block", text }) : null,
      retryable ? h("button", { class: "btn btn-sm view-retry", attrs: { type: "button" }, on: { click: retry } }, icon("reload", "view-icon"), "Try again") : null
    );
    view.frame.showCard(card);
    if (view.container.classList) view.container.classList.add("view-failed");
  }

  removeFrame() {
    const { cards, frame, modes } = this.view;
    cards.closeAll();
    if (modes.mode !== "inline" && modes.mode !== "split") modes.apply("inline", true);
    if (modes.mode === "split") sidePane.release(frame.stage); // still pinned: it comes back there
    frame.remove();
    modes.clearButtons();
    sidePane.stageChanged(this.view);
  }

  /** The proxy page is up: it gets the document (sandbox-resource-ready). */
  onProxyReady() {
    const view = this.view;
    if (this.resourceSent) {
      // The proxy page loaded again (the frame was moved or reloaded): start over.
      this.reset();
    }
    this.resourceSent = true;
    clearTimeout(this.readyTimer);
    const reply = this.reply;
    let html = this.flavor === "url" || !reply.documentUrl ? Promise.resolve("") : fetchDocument(reply.documentUrl);
    // A legacy MCP-UI remote-dom resource is a script: it runs in a renderer document.
    if (this.flavor === "remote-dom") html = html.then((script) => remoteDomDocument(script, { framework: reply.framework, theme: currentTheme() }));
    html.then(
      (text) => {
        if (!view.frame.iframe) return;
        const ctx = view.context.current();
        const params = {
          html: text,
          sandbox: INNER_SANDBOX,
          csp: cspDomains(reply.csp),
          permissions: permissionObject(reply.permissions),
          appSdk: this.appSdk,
          flavor: this.flavor,
          title: view.appName() + " view",
          theme: ctx.theme,
        };
        if (this.appSdk) Object.assign(params, view.openai.initialGlobals(ctx));
        view.bridge.post({ jsonrpc: "2.0", method: "ui/notifications/sandbox-resource-ready", params });
        this.phase = "live";
        view.frame.loaded();
      },
      (err) => this.fail({ code: "document_unavailable", message: "The view's document could not be loaded (" + (err && err.message ? err.message : "network error") + ")." })
    );
  }

  /** ui/notifications/initialized (or MCP-UI iframe-ready): the view may now be told things. */
  markReady() {
    const { bridge, context, feed, modes } = this.view;
    if (bridge.ready) return;
    bridge.ready = true;
    modes.renderButtons();
    if (bridge.protocol === "mcp" && context.last) context.changed(); // changes since initialize
    feed.sync();
  }

  /** ui/resource-teardown, waiting at most 3 s for the view's answer. */
  teardown(reason) {
    const { bridge, frame } = this.view;
    if (!frame.iframe || !bridge.ready || bridge.protocol !== "mcp") return Promise.resolve();
    return new Promise((resolve) => {
      const id = nextHostRequestId();
      const timer = setTimeout(() => {
        delete bridge.hostPending[id];
        resolve();
      }, TEARDOWN_WAIT_MS);
      bridge.hostPending[id] = () => {
        clearTimeout(timer);
        resolve();
      };
      bridge.post({ jsonrpc: "2.0", id, method: "ui/resource-teardown", params: { reason: reason || "unmount" } });
    });
  }

  destroy(reason) {
    const view = this.view;
    if (view.closed) return Promise.resolve();
    view.closed = true;
    if (this.observer) this.observer.unobserve(view.container);
    view.openai.closeModal();
    return this.teardown(reason).then(() => {
      clearTimeout(this.readyTimer);
      view.bridge.stopPacing();
      this.removeFrame();
      const i = liveAppViews.indexOf(view);
      if (i >= 0) liveAppViews.splice(i, 1);
      if (view.modes.mode === "split") sidePane.hidden(view, "server"); // gone from the page; the pin stays
    });
  }

  /** The app asked to be closed (request-teardown / Apps SDK requestClose). */
  honourTeardown() {
    const view = this.view;
    if (view.modal) {
      const dialog = view.modal.dialog;
      if (dialog && dialog.open) dialog.close();
      return;
    }
    if (this.closing) return;
    this.closing = true;
    this.teardown("closed by the app").then(() => {
      this.closing = false;
      this.removeFrame();
      this.phase = "closed";
      this.reset();
      const reopen = () => {
        this.phase = "idle";
        view.frame.showLoading();
        this.open();
      };
      view.frame.showCard(
        h(
          "div",
          { class: "view-closed" },
          h("span", { text: view.appName() + " closed this view." }),
          h("button", { class: "btn btn-sm", attrs: { type: "button" }, on: { click: reopen } }, icon("reload", "view-icon"), "Reopen")
        )
      );
    });
  }

  /** Tear the frame down (the view is told first) and open it again: a new token, the new
   *  iframe `allow`, and the lifecycle replayed from where the call stands. */
  remount(reason) {
    const view = this.view;
    return this.teardown(reason).then(() => {
      clearTimeout(this.readyTimer);
      view.bridge.stopPacing();
      this.removeFrame();
      this.reset();
      view.feed.forgetOutcome();
      this.phase = "idle";
      view.frame.showLoading();
      this.open();
    });
  }
}
