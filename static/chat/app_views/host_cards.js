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
 */
import { h, icon } from "../dom.js";
import { BAD_SCHEMES } from "./config.js";
import { request, rpcError } from "./rpc.js";

const ARM_MS = 500; // buttons wait this long after the card appears
const GESTURE_MODES = ["fullscreen", "pip"];
const MODE_WORDS = { fullscreen: "go full screen", pip: "show itself in picture in picture" };

function cardsSlot() {
  if (this.cardsEl && this.cardsEl.parentNode === this.stage) return this.cardsEl;
  if (!this.stage || !this.frame) return null;
  this.cardsEl = h("div", { class: "host-cards" });
  this.stage.insertBefore(this.cardsEl, this.frame);
  return this.cardsEl;
}

/** A card of `kind`: {icon, title, body: [nodes], actions: [{label, primary, run}], footer}.
 *  Returns {el, close(), setStatus(text, isError), setBusy(bool)} or null (no stage). */
function hostCard(kind, spec) {
  var slot = this.cardsSlot();
  if (!slot) return null;
  this.hostCardsOpen = this.hostCardsOpen || {};
  var self = this;
  var status = h("span", { class: "host-card-status", attrs: { role: "status" } });
  var buttons = spec.actions.map(function (a) {
    return h("button", {
      class: "btn btn-sm " + (a.primary ? "btn-primary" : "btn-secondary"),
      attrs: { type: "button", disabled: true, "data-card-action": a.name },
      text: a.label,
      on: {
        click: function (event) {
          if (!card.armed) return;
          a.run(event);
        },
      },
    });
  });
  var el = h(
    "div",
    { class: "host-card host-card-" + kind, attrs: { role: "group", "aria-label": spec.label || spec.title, "data-card": kind } },
    h("div", { class: "host-card-head" }, icon(spec.icon || "shield", "view-icon"), h("strong", { class: "host-card-title", text: spec.title })),
    spec.body,
    spec.footer || null,
    h("div", { class: "host-card-actions" }, buttons, status)
  );
  var card = {
    el: el,
    armed: false,
    close: function () {
      if (el.parentNode) el.parentNode.removeChild(el);
      if (self.hostCardsOpen[kind] === card) delete self.hostCardsOpen[kind];
    },
    setStatus: function (text, isError) {
      status.textContent = text || "";
      status.classList.toggle("is-error", !!isError);
    },
    setBusy: function (busy) {
      buttons.forEach(function (b) {
        b.disabled = !!busy;
      });
    },
  };
  this.hostCardsOpen[kind] = card;
  slot.appendChild(el);
  setTimeout(function () {
    card.armed = true;
    if (el.parentNode) card.setBusy(false);
  }, ARM_MS);
  return card;
}

/** A request of `kind` while a card of that kind waits: refused (JSON-RPC error). */
function cardPending(kind, done) {
  if (!this.hostCardsOpen || !this.hostCardsOpen[kind]) return false;
  done.fail({ code: "card_pending", message: "The person has not answered this app's previous request yet.", jsonrpcCode: -32000 });
  return true;
}

function closeHostCards() {
  var open = this.hostCardsOpen || {};
  Object.keys(open).forEach(function (kind) {
    if (open[kind].cancel) open[kind].cancel();
    else open[kind].close();
  });
  this.hostCardsOpen = {};
}

function doneFor(view, id, legacyDone) {
  return (
    legacyDone || {
      ok: function (r) {
        view.respond(id, r);
      },
      fail: function (e) {
        view.respondError(id, rpcError(e));
      },
    }
  );
}

// ---- ui/message ------------------------------------------------------------------------

/** ui/message (and MCP-UI prompt/intent, Apps SDK sendFollowUpMessage): the server posts
 *  it, or answers {confirm} and the card waits for Send. */
function sendMessage(id, params, legacyDone) {
  var self = this;
  var done = doneFor(this, id, legacyDone);
  if (this.cardPending("message", done)) return;
  this.forward("ui/message", params).then(
    function (result) {
      if (result && result.confirm && typeof result.confirm === "object") self.messageCard(result.confirm, done);
      else done.ok({});
    },
    function (err) {
      done.fail(err);
    }
  );
}

function messageCard(confirm, done) {
  var self = this;
  var app = String(confirm.appName || this.appName());
  var remember = null;
  var footer = null;
  if (confirm.canRemember) {
    remember = h("input", { attrs: { type: "checkbox", "data-card-remember": "" } });
    footer = h("label", { class: "host-card-remember" }, remember, h("span", { text: "Always allow " + app + " to send messages in this thread" }));
  }
  var answered = false;
  var decide = function (decision) {
    var msg = { type: "view.message_decide", proposal: confirm.proposal, decision: decision, remember: !!(remember && remember.checked) };
    return request(self.client, msg);
  };
  var card = this.hostCard("message", {
    icon: "user",
    title: app + " wants to send:",
    label: app + " wants to send a message",
    body: [
      h("blockquote", { class: "host-card-quote", text: String(confirm.text || "") }),
      h("p", { class: "host-card-meta", text: "It is posted in this thread as you, labelled “" + app + " (via view)”, and the model answers it." }),
    ],
    footer: footer,
    actions: [
      {
        name: "send",
        label: "Send",
        primary: true,
        run: function () {
          card.setBusy(true);
          card.setStatus("Sending…");
          decide("send").then(
            function () {
              answered = true;
              card.close();
              done.ok({});
            },
            function (err) {
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
      {
        name: "dismiss",
        label: "Dismiss",
        run: function () {
          card.cancel();
        },
      },
    ],
  });
  if (!card) {
    done.fail({ code: "not_shown", message: "The view is not shown.", jsonrpcCode: -32000 });
    return;
  }
  card.cancel = function () {
    if (answered) return;
    answered = true;
    card.close();
    decide("dismiss").catch(function () {}); // audited; the view hears at once
    done.fail({ code: "user_dismissed", message: "The user dismissed the message; it was not sent.", jsonrpcCode: -32000 });
  };
}

// ---- ui/open-link ----------------------------------------------------------------------

function linkParts(url) {
  try {
    var u = new URL(url);
    if (u.protocol === "http:" || u.protocol === "https:") return { strong: u.protocol + "//" + u.host, rest: url.slice((u.protocol + "//" + u.host).length) };
    return { strong: u.protocol, rest: url.slice(u.protocol.length) };
  } catch (e) {
    return { strong: "", rest: url };
  }
}

/** ui/open-link: the server decides (scheme, binding), then the card; Open opens it. */
function openLink(id, params, legacyDone) {
  var self = this;
  var url = typeof params.url === "string" ? params.url.trim() : "";
  var done = doneFor(this, id, legacyDone);
  if (this.cardPending("link", done)) return;
  this.forward("ui/open-link", Object.assign({}, params, { url: url })).then(
    function () {
      var scheme = (/^([a-z][a-z0-9+.-]*:)/i.exec(url) || [""])[0].toLowerCase();
      if (!scheme || BAD_SCHEMES.indexOf(scheme) >= 0) {
        // The server allowed it, the host still refuses browser-internal schemes.
        done.fail({ code: "scheme_not_allowed", message: "This link cannot be opened.", jsonrpcCode: -32003 });
        return;
      }
      self.linkCard(url, scheme, done);
    },
    function (err) {
      done.fail(err);
    }
  );
}

function linkCard(url, scheme, done) {
  var self = this;
  var app = this.appName();
  var parts = linkParts(url);
  var answered = false;
  var card = this.hostCard("link", {
    icon: "external",
    title: app + " wants to open a link",
    body: [h("p", { class: "host-card-url", attrs: { title: url } }, parts.strong ? h("strong", { text: parts.strong }) : null, parts.rest ? h("span", { text: parts.rest }) : null)],
    actions: [
      {
        name: "open",
        label: "Open",
        primary: true,
        run: function () {
          answered = true;
          card.close();
          // This click is the user gesture: the popup blocker lets it through.
          if (scheme === "http:" || scheme === "https:") window.open(url, "_blank", "noopener,noreferrer");
          else h("a", { attrs: { href: url, target: "_blank", rel: "noopener noreferrer" } }).click();
          self.showNotice("Opened a link from " + app + ": ", url);
          done.ok({});
        },
      },
      {
        name: "dismiss",
        label: "Dismiss",
        run: function () {
          card.cancel();
        },
      },
    ],
  });
  if (!card) {
    done.fail({ code: "not_shown", message: "The view is not shown.", jsonrpcCode: -32000 });
    return;
  }
  card.cancel = function () {
    if (answered) return;
    answered = true;
    card.close();
    done.fail({ code: "user_dismissed", message: "The user did not open the link.", jsonrpcCode: -32000 });
  };
}

// ---- display modes ---------------------------------------------------------------------

/** A click or key inside this view's frame just now: the page's transient activation
 *  (Chromium activates a frame's ancestors with it) while focus is in this frame. */
function frameGesture() {
  var ua = navigator.userActivation;
  return !!(ua && ua.isActive && this.frame && document.activeElement === this.frame);
}

/** Full screen / pip without a gesture in the frame: the card asks; Allow is the gesture. */
function displayModeCard(mode, proceed, decline) {
  var app = this.appName();
  var answered = false;
  var card = this.hostCard("display-mode", {
    icon: mode === "pip" ? "pip" : "fullscreen",
    title: app + " wants to " + MODE_WORDS[mode],
    body: [h("p", { class: "host-card-meta", text: mode === "pip" ? "It stays in a small panel over the chat until you bring it back." : "It fills the window; Esc or “Exit full screen” brings it back." })],
    actions: [
      {
        name: "allow",
        label: "Allow",
        primary: true,
        run: function () {
          answered = true;
          card.close();
          proceed("card");
        },
      },
      {
        name: "dismiss",
        label: "Not now",
        run: function () {
          card.cancel();
        },
      },
    ],
  });
  if (!card) {
    decline();
    return;
  }
  card.cancel = function () {
    if (answered) return;
    answered = true;
    card.close();
    decline();
  };
}

export { GESTURE_MODES };
export const hostCardMethods = { cardsSlot, hostCard, cardPending, closeHostCards, sendMessage, messageCard, openLink, linkCard, frameGesture, displayModeCard };
