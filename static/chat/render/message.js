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
      h("div", { class: "msg-content" }, header, renderMessageBody(msg), h("div", { class: "msg-tools" }))
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
