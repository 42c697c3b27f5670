/* A message's attached files (serialize_message's `attachments`, chat/media/presenters.py)
 * → DOM: images as thumbnails that open the lightbox, other files as chips with a
 * thumbnail where the worker made one (a PDF's first page), a name, type and size, and a
 * download link. Files still processing show a placeholder; rejected ones say why. The
 * same DOM live and after a reload, for every member. An app view's saved file ("<app> saved
 * report.csv", a message via that view) is rendered the same way. */
import { h, icon } from "../dom.js";
import { formatBytes } from "../format.js";
import { safeMediaSrc } from "../safe_urls.js";
import { renderMedia } from "./parts.js";

const TYPE_NAMES = {
  "application/pdf": "PDF",
  "application/zip": "ZIP archive",
  "application/gzip": "gzip archive",
  "text/plain": "Text",
  "text/markdown": "Markdown",
  "text/csv": "CSV",
  "application/json": "JSON",
};

export function typeName(mime) {
  if (TYPE_NAMES[mime]) return TYPE_NAMES[mime];
  const sub = String(mime || "").split("/")[1] || "file";
  return sub.replace(/^x-/, "").toUpperCase();
}

function fileIcon(kind) {
  return { image: "image", audio: "music", video: "video" }[kind] || "file";
}

function fileChip(part) {
  const asset = part.asset || {};
  const status = asset.status || "staged";
  const name = part.filename || "file";
  const meta = [typeName(part.mimeType), part.pages ? part.pages + (part.pages === 1 ? " page" : " pages") : "", part.size ? formatBytes(part.size) : ""].filter(Boolean).join(" · ");
  const data = { assetId: asset.id, mediaKey: "asset:" + asset.id, mediaStatus: status, mediaKind: part.mediaKind || "binary" };
  const thumb = status === "ready" ? safeMediaSrc(asset.thumbnailUrl, "image") : null;
  const visual = thumb
    ? h("img", { class: "file-chip-thumb", attrs: { src: thumb, alt: "", loading: "lazy", decoding: "async" } })
    : h("span", { class: "file-chip-icon", attrs: { "aria-hidden": "true" } }, icon(fileIcon(part.mediaKind)));
  const text = h(
    "span",
    { class: "file-chip-text" },
    h("span", { class: "file-chip-name", text: name, attrs: { title: name } }),
    h("span", { class: "file-chip-meta", text: status === "staged" ? "Processing… · " + meta : status === "rejected" ? asset.reason || "Couldn't be stored" : meta })
  );
  if (status === "ready") {
    const href = safeMediaSrc(asset.downloadUrl || asset.url, "binary");
    return h(
      "a",
      { class: "file-chip", data: data, attrs: { href: href, download: name, rel: "noopener", title: "Download " + name } },
      visual,
      text,
      h("span", { class: "file-chip-action", attrs: { "aria-hidden": "true" } }, icon("download"))
    );
  }
  return h("div", { class: "file-chip is-" + status, data: data, attrs: { role: status === "rejected" ? "note" : "status" } }, status === "rejected" ? h("span", { class: "file-chip-icon is-warn", attrs: { "aria-hidden": "true" } }, icon("alert")) : visual, text);
}

function imageTile(part) {
  const asset = part.asset || {};
  if (asset.status !== "ready") return fileChip(part);
  const node = renderMedia(part, {});
  if (node && node.classList) node.classList.add("msg-file-image");
  const download = safeMediaSrc(asset.downloadUrl, "binary");
  if (node && download) {
    node.appendChild(
      h("a", { class: "msg-file-download", attrs: { href: download, download: part.filename || "image", title: "Download " + (part.filename || "image"), "aria-label": "Download " + (part.filename || "image") } }, icon("download"))
    );
  }
  return node;
}

/** The `.msg-files` block of a message, or null when it has none. */
export function renderMessageFiles(msg) {
  const parts = Array.isArray(msg.attachments) ? msg.attachments : [];
  if (!parts.length) return null;
  const images = parts.filter(function (p) {
    return p && p.type === "image";
  });
  const others = parts.filter(function (p) {
    return p && p.type !== "image";
  });
  return h(
    "div",
    {
      // A file an app view saved in the thread (ui/download-file, chat/media/view_files.py):
      // the same chips, labelled as saved by the app the message names.
      class: "msg-files" + (msg.viaToolCall ? " is-app-saved" : ""),
      attrs: { "aria-label": (parts.length === 1 ? "1 " : parts.length + " ") + (msg.viaToolCall ? "saved " : "attached ") + (parts.length === 1 ? "file" : "files") },
    },
    images.length ? h("div", { class: "msg-file-images" }, images.map(imageTile)) : null,
    others.length ? h("div", { class: "msg-file-chips" }, others.map(fileChip)) : null
  );
}
