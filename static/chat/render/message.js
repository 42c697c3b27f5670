/* A message → its timeline entry (the same DOM for the reload and the live path). */
import { h, icon, logoMark } from "../dom.js";
import { dayKey, formatDay, formatFull, formatTime, hueClass, initials, toDate } from "../format.js";
import { renderMessageFiles } from "./files.js";
import { renderMessageResources } from "./message_resources.js";

export function authorName(msg) {
  if (msg.author && msg.author.name) return msg.author.name;
  if (msg.authorLabel) return msg.authorLabel;
  return { assistant: "Assistant", tool: "Tool", system: "System", user: "Someone" }[msg.role] || "Someone";
}

export function authorKey(msg) {
  if (msg.author && msg.author.id !== undefined) return "u:" + msg.author.id;
  return "l:" + msg.role + ":" + (msg.authorLabel || "") + ":" + (msg.viaToolCall || "");
}

function renderAvatar(msg, small) {
  const cls = "avatar" + (small ? " avatar-sm" : "");
  if (msg.author) {
    return h("span", { class: cls + " " + hueClass(msg.author.id), attrs: { "aria-hidden": "true" }, text: initials(msg.author.name) });
  }
  if (msg.viaToolCall) return h("span", { class: cls + " avatar-app", attrs: { "aria-hidden": "true" } }, icon("app"));
  if (msg.role === "assistant" && (msg.authorLabel || "") !== "Atrium") {
    return h("span", { class: cls + " avatar-assistant", attrs: { "aria-hidden": "true" } }, icon("sparkle"));
  }
  if (msg.role === "assistant" || msg.role === "system") {
    return h("span", { class: cls + " avatar-system", attrs: { "aria-hidden": "true" } }, logoMark());
  }
  return h("span", { class: cls + " avatar-system", attrs: { "aria-hidden": "true" } }, icon("wrench"));
}

export function renderMessageBody(msg) {
  if (msg.status === "streaming" || (!msg.html && msg.text && msg.status !== "complete")) {
    return h(
      "div",
      { class: "msg-body is-streaming" },
      h("span", { class: "stream-text", text: msg.text || "" }),
      h("span", { class: "caret", attrs: { "aria-hidden": "true" } })
    );
  }
  const body = h("div", { class: "msg-body md" });
  if (msg.html) {
    // The one trusted field: Markdown rendered and sanitized by the server (chat/markdown.py).
    body.innerHTML = msg.html;
  } else {
    body.textContent = msg.text || "";
  }
  if (msg.status === "error") {
    body.appendChild(h("p", { class: "msg-error" }, icon("alert"), "This message could not be completed."));
  }
  const attached = renderMessageResources(msg.resources); // server resources (issue 25)
  if (attached) body.appendChild(attached);
  const files = renderMessageFiles(msg); // attached files (render/files.js, issue 26)
  if (files) body.appendChild(files);
  return body;
}

/**
 * May the reader delete this message? A person's message, for its author (an owner or a
 * member) and for the workspace's owners (chat/services/messages.py decides; this only
 * offers the action). A message that started a tool call has no Delete (app.css hides it
 * once its card is there; the server refuses it anyway).
 */
export function canDeleteMessage(msg, opts) {
  if (!opts || !opts.canAct || msg.role !== "user" || !msg.author) return false;
  return msg.author.id === opts.userId || !!opts.isOwner;
}

/** The message's hover actions (shown on hover and on keyboard focus). */
export function renderMessageActions(msg, opts) {
  const bar = h("div", { class: "msg-actions", attrs: { role: "toolbar", "aria-label": "Message actions" } });
  if (canDeleteMessage(msg, opts)) {
    bar.appendChild(
      h(
        "button",
        { class: "icon-btn icon-btn-sm msg-action msg-delete", attrs: { type: "button", title: "Delete message", "aria-label": "Delete message" }, data: { action: "delete-message", messageId: msg.id } },
        icon("trash")
      )
    );
  }
  return bar;
}

function filesPhrase(count) {
  return count === 1 ? "its file" : "its " + count + " files";
}

/** The inline confirm step of deleting: names how many files go with the message. */
export function renderDeleteConfirm(msg) {
  const count = Array.isArray(msg.attachments) ? msg.attachments.length : 0;
  const question = count ? "Delete this message and " + filesPhrase(count) + " for everyone?" : "Delete this message for everyone?";
  const textId = "msg-delete-q-" + msg.id;
  return h(
    "div",
    { class: "msg-delete-confirm", attrs: { role: "group", "aria-labelledby": textId }, data: { messageId: msg.id } },
    icon("trash", "msg-delete-confirm-icon"),
    h("span", { class: "msg-delete-confirm-text", attrs: { id: textId } }, h("strong", { text: question }), " This can't be undone."),
    h("span", { class: "msg-delete-confirm-status", attrs: { role: "status" } }),
    h("button", { class: "btn btn-secondary btn-xs", attrs: { type: "button" }, data: { action: "delete-message-cancel" }, text: "Cancel" }),
    h("button", { class: "btn btn-danger-soft btn-xs", attrs: { type: "button" }, data: { action: "delete-message-confirm", messageId: msg.id }, text: count ? "Delete message and files" : "Delete message" })
  );
}

/**
 * A message → a timeline entry (<article class="entry msg-entry">) with empty
 * `.msg-tools` (tool call cards) and `.msg-views` (view rows) slots for the caller.
 * opts.appName(toolCallId) → the app name for "via <app>" tags.
 */
export function renderMessage(msg, opts) {
  opts = opts || {};
  const name = authorName(msg);
  const time = h("time", { class: "msg-time", text: formatTime(msg.createdAt), attrs: { datetime: msg.createdAt, title: formatFull(msg.createdAt) } });
  const header = h("div", { class: "msg-header" }, h("span", { class: "msg-author", text: name }));
  if (!msg.author && msg.role !== "user") {
    header.appendChild(h("span", { class: "tag tag-bot", text: msg.viaToolCall ? "App" : msg.role === "assistant" && name !== "Atrium" ? "AI" : "Bot" }));
  }
  if (msg.author && msg.authorLabel && msg.authorLabel.indexOf("prompt ") === 0) {
    header.appendChild(h("span", { class: "via-tag prompt-tag", attrs: { title: "Posted from a server's prompt" } }, icon("code"), msg.authorLabel));
  }
  if (msg.viaToolCall) {
    const appName = (opts.appName && opts.appName(msg.viaToolCall)) || "an app";
    header.appendChild(h("span", { class: "via-tag", attrs: { title: "Posted by an app view" } }, icon("app"), "via " + appName));
  }
  header.appendChild(time);
  if (msg.role === "assistant" && msg.status === "streaming" && opts.canAct) {
    header.appendChild(h("button", { class: "btn btn-ghost btn-xs msg-stop", attrs: { type: "button", title: "Stop the assistant's answer" }, data: { action: "cancel-turn" } }, icon("stop"), "Stop"));
  }

  const entry = h(
    "article",
    {
      class: "entry msg-entry role-" + (msg.role || "user") + (msg.status === "streaming" ? " is-streaming" : ""),
      data: { messageId: msg.id, authorKey: authorKey(msg), time: toDate(msg.createdAt) ? toDate(msg.createdAt).getTime() : 0, day: dayKey(msg.createdAt) },
      attrs: { "aria-label": name + ", " + formatTime(msg.createdAt) },
    },
    h("div", { class: "day-divider", attrs: { role: "separator" } }, h("span", { text: formatDay(msg.createdAt) })),
    h(
      "div",
      { class: "msg" },
      h("div", { class: "msg-gutter" }, renderAvatar(msg), h("time", { class: "msg-gutter-time", text: formatTime(msg.createdAt), attrs: { datetime: msg.createdAt, "aria-hidden": "true" } })),
      h("div", { class: "msg-content" }, header, renderMessageBody(msg), h("div", { class: "msg-tools" })),
      renderMessageActions(msg, opts)
    ),
    h("div", { class: "msg-views" })
  );
  return entry;
}

/** Update a streaming message's text in place (message.delta). */
export function updateStreamingText(entry, text) {
  const node = entry && entry.querySelector(".stream-text");
  if (node) node.textContent = text;
  return !!node;
}
