/* Host cards: what a view asks that needs its person (docs/view-bridge.md "Host cards").
 *
 * - ui/message that would start a model turn (F11): "<app> wants to send: …" with Send /
 *   Dismiss. The server froze the text and signed it; Send answers with that proposal
 *   (view.message_decide), so what is posted is exactly what the card showed.
 * - ui/request-display-mode to full screen or picture in picture without a click or key
 *   in that frame just before (F14): "<app> wants to go full screen" with Allow / Not now.
 * - ui/open-link (and Apps SDK openExternal, MCP-UI link) once the server allowed it: the
 *   whole URL, its scheme and host emphasised, and Open: a real click opens it (noopener).
 *
 * A card is host chrome above the frame (in the thread, in pip and full screen alike); the
 * view cannot script it. Its buttons arm a moment after it appears, so a click meant for
 * the frame cannot land on them. One card of a kind per view at a time: the view's next
 * request of that kind is refused while one waits (it cannot swap the text under a click).
 * A card belongs to its view's pending request: reloading the page (and the view) drops
 * both, and nothing is sent.
 *
 * Uses its view's frame (where cards go, the notice), bridge (ask the server, answer the
 * app) and client (view.message_decide).
 */
import { h, icon } from "../dom.js";
import { BAD_SCHEMES } from "./config.js";
import { request, rpcError } from "./rpc.js";

const ARM_MS = 500; // buttons wait this long after the card appears
export const GESTURE_MODES = ["fullscreen", "pip", "split"];
const MODE_WORDS = { fullscreen: "go full screen", pip: "show itself in picture in picture", split: "stay open beside the conversation" };

/** How a card's outcome reaches the app: a JSON-RPC answer, or (MCP-UI) the `legacyDone` given. */
function doneFor(bridge, id, legacyDone) {
  return (
    legacyDone || {
      ok: (r) => bridge.respond(id, r),
      fail: (e) => bridge.respondError(id, rpcError(e)),
    }
  );
}

function linkParts(url) {
  try {
    const u = new URL(url);
    if (u.protocol === "http:" || u.protocol === "https:") return { strong: u.protocol + "//" + u.host, rest: url.slice((u.protocol + "//" + u.host).length) };
    return { strong: u.protocol, rest: url.slice(u.protocol.length) };
  } catch (e) {
    return { strong: "", rest: url };
  }
}

export class HostCards {
  constructor(view) {
    this.view = view;
    this.el = null; // the cards' box above the frame
    this.open = {}; // kind → the card waiting
  }

  slot() {
    const frame = this.view.frame;
    if (this.el && this.el.parentNode === frame.stage) return this.el;
    if (!frame.stage || !frame.iframe) return null;
    this.el = h("div", { class: "host-cards" });
    frame.insertAboveFrame(this.el);
    return this.el;
  }

  /** A card of `kind`: {icon, title, body: [nodes], actions: [{label, primary, run}], footer}.
   *  Returns {el, close(), setStatus(text, isError), setBusy(bool)} or null (no stage). */
  card(kind, spec) {
    const slot = this.slot();
    if (!slot) return null;
    const status = h("span", { class: "host-card-status", attrs: { role: "status" } });
    const buttons = spec.actions.map((a) =>
      h("button", {
        class: "btn btn-sm " + (a.primary ? "btn-primary" : "btn-secondary"),
        attrs: { type: "button", disabled: true, "data-card-action": a.name },
        text: a.label,
        on: {
          click: (event) => {
            if (!card.armed) return;
            a.run(event);
          },
        },
      })
    );
    const el = h(
      "div",
      { class: "host-card host-card-" + kind, attrs: { role: "group", "aria-label": spec.label || spec.title, "data-card": kind } },
      h("div", { class: "host-card-head" }, icon(spec.icon || "shield", "view-icon"), h("strong", { class: "host-card-title", text: spec.title })),
      spec.body,
      spec.footer || null,
      h("div", { class: "host-card-actions" }, buttons, status)
    );
    const card = {
      el,
      armed: false,
      close: () => {
        if (el.parentNode) el.parentNode.removeChild(el);
        if (this.open[kind] === card) delete this.open[kind];
      },
      setStatus: (text, isError) => {
        status.textContent = text || "";
        status.classList.toggle("is-error", !!isError);
      },
      setBusy: (busy) => {
        buttons.forEach((b) => {
          b.disabled = !!busy;
        });
      },
    };
    this.open[kind] = card;
    slot.appendChild(el);
    setTimeout(() => {
      card.armed = true;
      if (el.parentNode) card.setBusy(false);
    }, ARM_MS);
    return card;
  }

  /** A request of `kind` while a card of that kind waits: refused (JSON-RPC error). */
  pending(kind, done) {
    if (!this.open[kind]) return false;
    done.fail({ code: "card_pending", message: "The person has not answered this app's previous request yet.", jsonrpcCode: -32000 });
    return true;
  }

  /** The waiting card of `kind` (if any) is answered "not now". */
  cancel(kind) {
    if (this.open[kind]) this.open[kind].cancel();
  }

  /** Every card goes (the document it answers is being replaced or closed). */
  closeAll() {
    const open = this.open;
    Object.keys(open).forEach((kind) => {
      if (open[kind].cancel) open[kind].cancel();
      else open[kind].close();
    });
    this.open = {};
  }

  // ---- ui/message ----------------------------------------------------------------------

  /** ui/message (and MCP-UI prompt/intent, Apps SDK sendFollowUpMessage): the server posts
   *  it, or answers {confirm} and the card waits for Send. */
  sendMessage(id, params, legacyDone) {
    const done = doneFor(this.view.bridge, id, legacyDone);
    if (this.pending("message", done)) return;
    this.view.bridge.forward("ui/message", params).then(
      (result) => {
        if (result && result.confirm && typeof result.confirm === "object") this.messageCard(result.confirm, done);
        else done.ok({});
      },
      (err) => done.fail(err)
    );
  }

  messageCard(confirm, done) {
    const app = String(confirm.appName || this.view.appName());
    let remember = null;
    let footer = null;
    if (confirm.canRemember) {
      remember = h("input", { attrs: { type: "checkbox", "data-card-remember": "" } });
      footer = h("label", { class: "host-card-remember" }, remember, h("span", { text: "Always allow " + app + " to send messages in this thread" }));
    }
    let answered = false;
    const decide = (decision) => request(this.view.client, { type: "view.message_decide", proposal: confirm.proposal, decision, remember: !!(remember && remember.checked) });
    const card = this.card("message", {
      icon: "user",
      title: app + " wants to send:",
      label: app + " wants to send a message",
      body: [
        h("blockquote", { class: "host-card-quote", text: String(confirm.text || "") }),
        h("p", { class: "host-card-meta", text: "It is posted in this thread as you, labelled “" + app + " (via view)”, and the model answers it." }),
      ],
      footer,
      actions: [
        {
          name: "send",
          label: "Send",
          primary: true,
          run: () => {
            card.setBusy(true);
            card.setStatus("Sending…");
            decide("send").then(
              () => {
                answered = true;
                card.close();
                done.ok({});
              },
              (err) => {
                if (err.code === "already_answered" || err.code === "invalid_proposal" || err.code === "not_found") {
                  answered = true;
                  card.close();
                  done.fail(err);
                  return;
                }
                card.setBusy(false);
                card.setStatus(err.message || "It could not be sent.", true);
              }
            );
          },
        },
        { name: "dismiss", label: "Dismiss", run: () => card.cancel() },
      ],
    });
    if (!card) {
      done.fail({ code: "not_shown", message: "The view is not shown.", jsonrpcCode: -32000 });
      return;
    }
    card.cancel = () => {
      if (answered) return;
      answered = true;
      card.close();
      decide("dismiss").catch(() => {}); // audited; the view hears at once
      done.fail({ code: "user_dismissed", message: "The user dismissed the message; it was not sent.", jsonrpcCode: -32000 });
    };
  }

  // ---- ui/open-link --------------------------------------------------------------------

  /** ui/open-link: the server decides (scheme, binding), then the card; Open opens it. */
  openLink(id, params, legacyDone) {
    const url = typeof params.url === "string" ? params.url.trim() : "";
    const done = doneFor(this.view.bridge, id, legacyDone);
    if (this.pending("link", done)) return;
    this.view.bridge.forward("ui/open-link", Object.assign({}, params, { url })).then(
      () => {
        const scheme = (/^([a-z][a-z0-9+.-]*:)/i.exec(url) || [""])[0].toLowerCase();
        if (!scheme || BAD_SCHEMES.indexOf(scheme) >= 0) {
          // The server allowed it, the host still refuses browser-internal schemes.
          done.fail({ code: "scheme_not_allowed", message: "This link cannot be opened.", jsonrpcCode: -32003 });
          return;
        }
        this.linkCard(url, scheme, done);
      },
      (err) => done.fail(err)
    );
  }

  linkCard(url, scheme, done) {
    const app = this.view.appName();
    const parts = linkParts(url);
    let answered = false;
    const card = this.card("link", {
      icon: "external",
      title: app + " wants to open a link",
      body: [h("p", { class: "host-card-url", attrs: { title: url } }, parts.strong ? h("strong", { text: parts.strong }) : null, parts.rest ? h("span", { text: parts.rest }) : null)],
      actions: [
        {
          name: "open",
          label: "Open",
          primary: true,
          run: () => {
            answered = true;
            card.close();
            // This click is the user gesture: the popup blocker lets it through.
            if (scheme === "http:" || scheme === "https:") window.open(url, "_blank", "noopener,noreferrer");
            else h("a", { attrs: { href: url, target: "_blank", rel: "noopener noreferrer" } }).click();
            this.view.frame.showNotice("Opened a link from " + app + ": ", url);
            done.ok({});
          },
        },
        { name: "dismiss", label: "Dismiss", run: () => card.cancel() },
      ],
    });
    if (!card) {
      done.fail({ code: "not_shown", message: "The view is not shown.", jsonrpcCode: -32000 });
      return;
    }
    card.cancel = () => {
      if (answered) return;
      answered = true;
      card.close();
      done.fail({ code: "user_dismissed", message: "The user did not open the link.", jsonrpcCode: -32000 });
    };
  }

  // ---- display modes -------------------------------------------------------------------

  /** A click or key inside this view's frame just now: the page's transient activation
   *  (Chromium activates a frame's ancestors with it) while focus is in this frame. */
  frameGesture() {
    const ua = navigator.userActivation;
    const iframe = this.view.frame.iframe;
    return !!(ua && ua.isActive && iframe && document.activeElement === iframe);
  }

  /** Full screen / pip without a gesture in the frame: the card asks; Allow is the gesture. */
  displayModeCard(mode, proceed, decline) {
    const app = this.view.appName();
    let answered = false;
    const card = this.card("display-mode", {
      icon: mode === "pip" || mode === "split" ? "pip" : "fullscreen",
      title: app + " wants to " + MODE_WORDS[mode],
      body: [h("p", { class: "host-card-meta", text: mode === "pip" ? "It stays in a small panel over the chat until you bring it back." : mode === "split" ? "It is pinned in a pane beside the thread, for you only, until you unpin it." : "It fills the window; Esc or “Exit full screen” brings it back." })],
      actions: [
        {
          name: "allow",
          label: "Allow",
          primary: true,
          run: () => {
            answered = true;
            card.close();
            proceed("card");
          },
        },
        { name: "dismiss", label: "Not now", run: () => card.cancel() },
      ],
    });
    if (!card) {
      decline();
      return;
    }
    card.cancel = () => {
      if (answered) return;
      answered = true;
      card.close();
      decline();
    };
  }
}
