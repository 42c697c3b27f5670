/* Server requests to a person (chat/server_requests/): a server's question during a call —
 * a form built from its schema, a web page to open, or a sampling consent card. The person
 * the call runs for answers; everyone else sees who it waits for. Cards sit right after
 * their call's card (a view's call: in the view's call feed), and come back on reload from
 * the snapshot's `serverRequests`. */
import { h, icon } from "./dom.js";
import { formatRelative } from "./format.js";
import { on, send } from "./socket.js";
import { toast } from "./toasts.js";
import { canAct, els, thread } from "./thread_state.js";

const requests = new Map(); // id → payload
const cards = new Map(); // id → element
const opened = new Set(); // URL cards whose page this person opened (this page only)

function serverName(req) {
  return (req.server && (req.server.name || req.server.slug)) || "The server";
}

function forName(req) {
  return (req.forUser && req.forUser.name) || "the person this call runs for";
}

function isMine(req) {
  return !!(req.forUser && req.forUser.id === thread.me.id) && canAct();
}

function title(req) {
  // Issue 27: an app's view asks (sampling, or the model running one of the view's tools).
  if (req.kind === "view_tool") return "The model " + (req.status === "accepted" ? "ran " : "wants to run ") + ((req.viewTool && req.viewTool.name) || "a tool") + " in the " + serverName(req) + " view";
  if (req.kind === "sampling" && req.requester === "app_view") return "The " + serverName(req) + " app (its view) wants to use this workspace’s model";
  if (req.kind === "sampling") return serverName(req) + " wants to use this workspace’s model";
  if (req.kind === "elicitation_url") return serverName(req) + " asks " + (isMine(req) ? "you" : forName(req)) + " to open a web page";
  return serverName(req) + " asks " + (isMine(req) ? "you" : forName(req));
}

const STATUS_TEXT = { accepted: "Answered", declined: "Declined", cancelled: "Cancelled", expired: "Expired", failed: "Failed" };

function decidedLine(req) {
  const outcome = req.outcome || {};
  let text = STATUS_TEXT[req.status] || req.status;
  if (req.kind === "sampling" && req.status === "accepted") text = outcome.allowance ? "Allowed in this thread" : "Approved";
  if (req.kind === "view_tool" && req.status === "accepted") text = outcome.basis === "read_only" ? "Ran (read-only)" : "Approved";
  if (req.kind === "elicitation_url" && req.completedAt) text = "Finished";
  if (req.decidedBy) text += " by " + req.decidedBy.name;
  if (req.decidedAt) text += " " + formatRelative(req.decidedAt);
  if (outcome.fields && outcome.fields.length) text += " · fields: " + outcome.fields.join(", ");
  if (outcome.reason && req.status !== "accepted") text += " · " + String(outcome.reason).replace(/_/g, " ");
  return text;
}

// ---- answering -------------------------------------------------------------------------

function busy(card, on_) {
  card.querySelectorAll("button, input, select").forEach(function (el) {
    el.disabled = on_;
  });
}

function submit(card, req, msg) {
  busy(card, true);
  card.querySelectorAll(".field-error").forEach(function (el) {
    el.remove();
  });
  card.querySelectorAll("[aria-invalid]").forEach(function (el) {
    el.removeAttribute("aria-invalid");
  });
  return send(Object.assign({ requestId: req.id }, msg)).then(
    function (reply) {
      if (reply.ok) return;
      busy(card, false);
      const error = reply.error || {};
      const problems = (error.details && error.details.problems) || [];
      if (!problems.length) toast(error.message || "That didn't work.", "error");
      problems.forEach(function (p) {
        const input = card.querySelector('[name="' + CSS.escape(p.field) + '"]');
        const field = input ? input.closest(".srq-field") : null;
        if (input) input.setAttribute("aria-invalid", "true");
        if (field) field.appendChild(h("p", { class: "field-error", text: p.message, attrs: { role: "alert" } }));
      });
      const first = card.querySelector('[aria-invalid="true"]');
      if (first) first.focus();
    },
    function (err) {
      busy(card, false);
      toast(err.message, "error");
    }
  );
}

// ---- forms -----------------------------------------------------------------------------

const INPUT_TYPES = { email: "email", uri: "url", date: "date", "date-time": "datetime-local" };

function control(field, id) {
  const t = field.type;
  const attrs = { id: id, name: field.name, required: field.required && t !== "boolean" && t !== "multi" };
  if (field.description) attrs["aria-describedby"] = id + "-d";
  if (t === "boolean") {
    return h("input", { class: "srq-check", attrs: Object.assign(attrs, { type: "checkbox", checked: field.default === true }) });
  }
  if (t === "enum") {
    const select = h("select", { class: "input input-sm", attrs: attrs });
    if (!field.required || field.default === undefined) select.appendChild(h("option", { text: field.required ? "Choose…" : "—", attrs: { value: "" } }));
    field.options.forEach(function (o) {
      select.appendChild(h("option", { text: o.title, attrs: { value: o.value, selected: o.value === field.default } }));
    });
    return select;
  }
  if (t === "multi") {
    const chosen = Array.isArray(field.default) ? field.default : [];
    return h(
      "div",
      { class: "srq-multi", attrs: { role: "group", id: id, "aria-label": field.title } },
      field.options.map(function (o) {
        return h("label", { class: "srq-option" }, h("input", { attrs: { type: "checkbox", name: field.name, value: o.value, checked: chosen.indexOf(o.value) !== -1 } }), " ", o.title);
      })
    );
  }
  if (t === "integer" || t === "number") {
    Object.assign(attrs, { type: "number", step: t === "integer" ? "1" : "any", min: field.minimum, max: field.maximum, inputmode: t === "integer" ? "numeric" : "decimal" });
  } else {
    Object.assign(attrs, { type: INPUT_TYPES[field.format] || "text", minlength: field.minLength, maxlength: field.maxLength, autocomplete: field.format === "email" ? "email" : "off" });
  }
  const input = h("input", { class: "input input-sm", attrs: attrs });
  if (field.default !== undefined && field.default !== null) input.value = String(field.default);
  return input;
}

function readForm(form, fields) {
  const content = {};
  fields.forEach(function (field) {
    if (field.type === "multi") {
      content[field.name] = Array.prototype.filter
        .call(form.querySelectorAll('input[name="' + CSS.escape(field.name) + '"]'), function (i) {
          return i.checked;
        })
        .map(function (i) {
          return i.value;
        });
      return;
    }
    const el = form.elements.namedItem(field.name);
    if (!el) return;
    if (field.type === "boolean") content[field.name] = el.checked;
    else if (el.value === "") return;
    else if (field.type === "integer" || field.type === "number") content[field.name] = Number(el.value);
    else content[field.name] = el.value;
  });
  return content;
}

function renderForm(card, req) {
  const form = h("form", { class: "srq-form", attrs: { novalidate: true, "aria-label": "Answer " + serverName(req) } });
  req.fields.forEach(function (field, i) {
    const id = "srq-" + req.id + "-" + i;
    const label = h("label", { attrs: { for: id } }, field.title, field.required ? h("span", { class: "srq-required", text: " *", attrs: { "aria-hidden": "true" } }) : null);
    const input = control(field, id);
    const row = h("div", { class: "srq-field field" + (field.type === "boolean" ? " srq-field-inline" : "") });
    if (field.type === "boolean") row.append(input, label);
    else row.append(label, input);
    if (field.description) row.appendChild(h("p", { class: "srq-help", text: field.description, attrs: { id: id + "-d" } }));
    form.appendChild(row);
  });
  const actions = h(
    "div",
    { class: "approval-actions" },
    h("button", { class: "btn btn-primary btn-sm", text: "Accept", attrs: { type: "submit" } }),
    h("button", { class: "btn btn-secondary btn-sm", text: "Decline", attrs: { type: "button" }, data: { srq: "decline" } }),
    h("button", { class: "btn btn-ghost btn-sm", text: "Cancel", attrs: { type: "button" }, data: { srq: "cancel" } })
  );
  form.appendChild(actions);
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    submit(card, req, { type: "serverrequest.answer", answer: "accept", content: readForm(form, req.fields) });
  });
  actions.addEventListener("click", function (event) {
    const btn = event.target instanceof Element ? event.target.closest("button[data-srq]") : null;
    if (btn) submit(card, req, { type: "serverrequest.answer", answer: btn.dataset.srq });
  });
  card.appendChild(form);
}

// ---- web pages -------------------------------------------------------------------------

function renderUrl(card, req) {
  card.appendChild(h("p", { class: "srq-domain" }, "This opens a page on ", h("strong", { text: req.domain || "an unknown site" })));
  card.appendChild(h("code", { class: "srq-url", text: req.url }));
  const actions = h("div", { class: "approval-actions" });
  if (!opened.has(req.id)) {
    // Opened only by the person's click, in a new tab, never in a frame.
    const link = h("a", { class: "btn btn-primary btn-sm srq-open", attrs: { href: req.url, target: "_blank", rel: "noopener noreferrer" } }, "Open " + (req.domain || "page"), icon("external"));
    link.addEventListener("click", function () {
      opened.add(req.id);
      setTimeout(function () {
        place(req); // after the tab opened: offer "I've finished"
      }, 0);
    });
    actions.append(link, h("button", { class: "btn btn-secondary btn-sm", text: "Decline", attrs: { type: "button" }, data: { srq: "decline" } }));
  } else {
    actions.append(
      h("button", { class: "btn btn-primary btn-sm", text: "I’ve finished", attrs: { type: "button" }, data: { srq: "finish" } }),
      h("a", { class: "btn btn-ghost btn-sm", text: "Open again", attrs: { href: req.url, target: "_blank", rel: "noopener noreferrer" } }),
      h("button", { class: "btn btn-ghost btn-sm", text: "Cancel", attrs: { type: "button" }, data: { srq: "cancel" } })
    );
    card.appendChild(h("p", { class: "approval-note" }, icon("info"), "Finish on the page, then come back here."));
  }
  actions.addEventListener("click", function (event) {
    const btn = event.target instanceof Element ? event.target.closest("button[data-srq]") : null;
    if (!btn) return;
    if (btn.dataset.srq === "finish") submit(card, req, { type: "serverrequest.finish" });
    else submit(card, req, { type: "serverrequest.answer", answer: btn.dataset.srq });
  });
  card.appendChild(actions);
}

// ---- sampling --------------------------------------------------------------------------

function messageText(m) {
  const content = Array.isArray(m.content) ? m.content : [m.content];
  return content
    .map(function (c) {
      if (!c) return "";
      if (c.type === "text") return c.text;
      return "[" + (c.type || "content") + "]";
    })
    .join(" ");
}

function renderSampling(card, req, mine) {
  const s = req.sampling || {};
  if (s.systemPrompt) card.appendChild(h("p", { class: "srq-system" }, h("strong", { text: "System prompt: " }), s.systemPrompt));
  const list = h("ol", { class: "srq-messages" });
  (s.messages || []).slice(0, 20).forEach(function (m) {
    list.appendChild(h("li", null, h("span", { class: "srq-role", text: (m.role || "?") + ": " }), messageText(m)));
  });
  card.appendChild(list);
  card.appendChild(h("p", { class: "approval-meta", text: "Up to " + (s.maxTokens || "?") + " tokens" + (s.tools && s.tools.length ? " · tools: " + s.tools.join(", ") : "") }));
  if (!mine) return;
  const actions = h(
    "div",
    { class: "approval-actions" },
    h("button", { class: "btn btn-primary btn-sm", text: "Approve once", attrs: { type: "button" }, data: { srq: "accept" } }),
    h("button", { class: "btn btn-secondary btn-sm", text: "Allow in this thread", attrs: { type: "button", title: "Sampling requests of " + serverName(req) + (req.requester === "app_view" ? "’s view" : "") + " in this thread run without asking" }, data: { srq: "accept", remember: "thread" } }),
    h("button", { class: "btn btn-danger-soft btn-sm", text: "Reject", attrs: { type: "button" }, data: { srq: "decline" } })
  );
  actions.addEventListener("click", function (event) {
    const btn = event.target instanceof Element ? event.target.closest("button[data-srq]") : null;
    if (btn) submit(card, req, { type: "serverrequest.answer", answer: btn.dataset.srq, remember: btn.dataset.remember || "" });
  });
  card.appendChild(actions);
}

// ---- a tool an app view provides (issue 27) ------------------------------------------

function renderViewTool(card, req, mine) {
  const t = req.viewTool || {};
  card.appendChild(h("p", { class: "approval-meta", text: "A tool the " + serverName(req) + " view provides" + (t.risk ? " · Risk: " + t.risk : "") }));
  card.appendChild(h("code", { class: "srq-url", text: JSON.stringify(t.arguments || {}) }));
  if (!mine) return;
  const actions = h(
    "div",
    { class: "approval-actions" },
    h("button", { class: "btn btn-primary btn-sm", text: "Approve once", attrs: { type: "button" }, data: { srq: "accept" } }),
    h("button", { class: "btn btn-danger-soft btn-sm", text: "Reject", attrs: { type: "button" }, data: { srq: "decline" } })
  );
  actions.addEventListener("click", function (event) {
    const btn = event.target instanceof Element ? event.target.closest("button[data-srq]") : null;
    if (btn) submit(card, req, { type: "serverrequest.answer", answer: btn.dataset.srq });
  });
  card.appendChild(actions);
}

// ---- the card --------------------------------------------------------------------------

export function renderServerRequest(req) {
  const pending = req.status === "pending";
  const done = req.status === "accepted" && (req.kind !== "elicitation_url" || req.completedAt || !req.retriesCall);
  const state = pending ? "pending" : done ? "approved" : req.status === "expired" ? "expired" : "rejected";
  const card = h("div", {
    class: "approval srq srq-" + req.kind + " approval-" + state,
    attrs: { role: "group", "aria-label": title(req) },
    data: { serverRequestId: req.id, status: req.status, kind: req.kind },
  });
  const iconName = pending ? (req.kind === "sampling" || req.kind === "view_tool" ? "sparkle" : req.kind === "elicitation_url" ? "external" : "user") : state === "approved" ? "check" : "ban";
  card.appendChild(h("div", { class: "approval-head" }, icon(iconName), h("strong", { text: title(req) })));
  if (!pending) {
    card.appendChild(h("p", { class: "approval-meta", text: decidedLine(req) }));
    return card;
  }
  if (req.message) card.appendChild(h("p", { class: "srq-message", text: req.message }));
  const mine = isMine(req);
  if (!mine) {
    const waitingText = "Waiting for " + forName(req) + " to answer " + serverName(req) + "’s " + (req.kind === "sampling" ? "request" : "question");
    if (req.kind === "sampling") renderSampling(card, req, false);
    if (req.kind === "view_tool") renderViewTool(card, req, false);
    if (req.kind === "elicitation_url") card.appendChild(h("p", { class: "srq-domain" }, "A page on ", h("strong", { text: req.domain || "an unknown site" })));
    card.appendChild(h("p", { class: "approval-readonly srq-waiting" }, icon("clock"), waitingText));
    return card;
  }
  if (req.kind === "elicitation_form") renderForm(card, req);
  else if (req.kind === "elicitation_url") renderUrl(card, req);
  else if (req.kind === "view_tool") renderViewTool(card, req, true);
  else renderSampling(card, req, true);
  if (req.expiresAt) card.appendChild(h("p", { class: "approval-note" }, icon("clock"), "Expires " + formatRelative(req.expiresAt)));
  return card;
}

function anchorFor(req) {
  if (req.toolCallId === null || req.toolCallId === undefined) return null;
  return els.list.querySelector('.toolcall[data-tool-call-id="' + req.toolCallId + '"]');
}

function orphans() {
  let box = document.getElementById("srq-orphans");
  if (!box) {
    box = h("div", { class: "srq-orphans", attrs: { id: "srq-orphans" } });
    els.list.appendChild(box);
  }
  return box;
}

/** Where a request's card goes: right after its call's card — or, when that card sits in
 *  an app view's folded group of calls (app_views/call_group.js), in the group's area for
 *  what needs a person, beside the view, where it is seen while it waits. */
function slotFor(req) {
  const anchor = anchorFor(req);
  if (!anchor) return null;
  // Answered, it folds into the group with its call.
  const grouped = req.status === "pending" ? anchor.closest(".view-call-group-body") : null;
  const box = grouped ? grouped.closest(".view-calls") : null;
  const attention = box ? box.querySelector(":scope > .view-calls-attention") : null;
  return attention ? { parent: attention } : { after: anchor };
}

function inSlot(card, slot) {
  return !!slot && card.isConnected && (slot.after ? card.previousElementSibling === slot.after : card.parentElement === slot.parent);
}

function place(req) {
  const old = cards.get(req.id);
  const hadFocus = !!(old && old.contains(document.activeElement));
  const slot = slotFor(req);
  // A pending form keeps what the person typed while others' events re-render the page.
  if (old && req.status === "pending" && old.dataset.status === "pending" && req.kind === "elicitation_form" && inSlot(old, slot)) return;
  const card = renderServerRequest(req);
  cards.set(req.id, card);
  if (old) old.remove();
  if (slot && slot.after) {
    let after = slot.after;
    while (after.nextElementSibling && after.nextElementSibling.classList.contains("srq") && Number(after.nextElementSibling.dataset.serverRequestId) < req.id) after = after.nextElementSibling;
    after.after(card);
  } else if (slot) {
    slot.parent.appendChild(card);
  } else {
    orphans().appendChild(card);
  }
  if (hadFocus) card.focus({ preventScroll: true });
}

function apply(req) {
  if (!req || req.id === undefined) return;
  requests.set(req.id, req);
  if (req.status !== "pending") opened.delete(req.id);
  place(req);
}

/** Render the snapshot's requests, then follow the socket. */
export function initServerRequests(list) {
  (list || []).forEach(apply);
  on("serverrequest", apply);
  // A call's card may be drawn (or redrawn elsewhere) after its request: follow it.
  on("toolcall", function (call) {
    requests.forEach(function (req) {
      if (req.toolCallId === call.id) {
        const card = cards.get(req.id);
        const anchor = anchorFor(req);
        if (anchor && card && card.previousElementSibling !== anchor && !(card.previousElementSibling && card.previousElementSibling.classList.contains("srq"))) place(req);
      }
    });
  });
  on("role", function () {
    requests.forEach(place);
  });
}
