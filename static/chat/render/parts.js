/* A tool result's parts (server-normalized, chat/presenters.py) → DOM. */
import { h, icon } from "../dom.js";
import { formatBytes, formatDuration, strHash } from "../format.js";
import { safeLinkHref, safeMediaSrc, toBlobUrl } from "../safe_urls.js";

const LONG_TEXT_CHARS = 1600;
const LONG_TEXT_LINES = 18;

function renderTextPart(part) {
  const text = String(part.text || "");
  const wrap = h("div", { class: "part part-text" });
  if (part.uri) wrap.appendChild(h("div", { class: "part-label" }, icon("file"), h("span", { text: part.uri })));
  const pre = h("div", { class: "text-block", text: text });
  wrap.appendChild(pre);
  if (text.length > LONG_TEXT_CHARS || text.split("\n").length > LONG_TEXT_LINES) {
    wrap.classList.add("is-clamped");
    wrap.appendChild(h("button", { class: "btn btn-link btn-xs text-expand", text: "Show more", attrs: { type: "button", "aria-expanded": "false" }, data: { action: "expand-text" } }));
  }
  return wrap;
}

function renderLinkPart(part) {
  const href = part.clickable !== false ? safeLinkHref(part.uri) : null;
  const title = part.title || part.name || part.uri || "Link";
  const inner = [
    h("span", { class: "link-icon", attrs: { "aria-hidden": "true" } }, icon(href ? "link" : "file")),
    h(
      "span",
      { class: "link-text" },
      h("span", { class: "link-title", text: title }),
      part.description ? h("span", { class: "link-desc", text: part.description }) : null,
      h("span", { class: "link-uri", text: [part.uri, part.mimeType, part.size ? formatBytes(part.size) : ""].filter(Boolean).join(" · ") })
    ),
  ];
  if (href) {
    inner.push(icon("external", "link-ext"));
    return h("a", { class: "part link-card", attrs: { href: href, target: "_blank", rel: "noopener noreferrer nofollow" } }, inner);
  }
  return h("div", { class: "part link-card is-static" }, inner);
}

function renderErrorPart(part) {
  return h("div", { class: "part callout callout-warn", attrs: { role: "note" } }, icon("alert"), h("div", { class: "callout-body" }, h("p", { class: "callout-text", text: part.message || "Part of this result could not be shown." }), part.code ? h("code", { class: "callout-code", text: part.code }) : null));
}

export function renderPart(part, opts) {
  if (!part || typeof part !== "object") return null;
  switch (part.type) {
    case "text":
      return renderTextPart(part);
    case "image":
    case "file":
      return renderMedia(part, opts);
    case "link":
      return renderLinkPart(part);
    case "error":
      return renderErrorPart(part);
    case "ui":
      return null; // views get their own row (renderViewRow)
    default:
      return h("div", { class: "part callout callout-muted" }, icon("info"), h("p", { class: "callout-text", text: "Unsupported content (" + String(part.type) + ")" }));
  }
}

function mediaKindOf(part) {
  return part.type === "image" ? "image" : part.mediaKind || "binary";
}

function mediaLabel(kind) {
  return { image: "Image", audio: "Audio", video: "Video" }[kind] || "File";
}

function sizeHint(el, w, hgt, maxW) {
  if (w > 0 && hgt > 0) {
    el.style.aspectRatio = w + " / " + hgt;
    el.style.width = Math.min(w, maxW) + "px";
  }
}

/**
 * An image or file part → an element carrying data-media-key (stable across re-renders,
 * so live media can be kept while a card is re-rendered) and data-asset-id for staged
 * assets (so `media` events update it in place).
 */
export function renderMedia(part, opts) {
  opts = opts || {};
  const kind = mediaKindOf(part);
  const asset = part.asset && typeof part.asset === "object" ? part.asset : null;
  const status = asset ? asset.status || "staged" : "inline";
  const src = asset ? asset.url : part.src;
  const key = asset && asset.id !== undefined ? "asset:" + asset.id : "src:" + strHash(typeof src === "string" ? src : "");
  const filename = part.filename || (asset && asset.filename) || "";
  const size = part.size || (asset && asset.size);
  const width = (asset && asset.width) || part.width;
  const height = (asset && asset.height) || part.height;
  const data = { mediaKey: key, mediaStatus: status, mediaKind: kind };
  if (asset && asset.id !== undefined) data.assetId = asset.id;

  const meta = [filename, part.mimeType, size ? formatBytes(size) : "", width && height ? width + "×" + height : "", asset && asset.duration ? formatDuration(asset.duration) : ""].filter(Boolean).join(" · ");

  if (status === "staged") {
    const box = h(
      "div",
      { class: "part media-placeholder media-" + kind, data: data, attrs: { role: "status", "aria-label": mediaLabel(kind) + " is being processed" } },
      h("div", { class: "shimmer", attrs: { "aria-hidden": "true" } }),
      h("div", { class: "media-placeholder-label" }, icon(kind === "image" ? "image" : kind === "audio" ? "music" : kind === "video" ? "video" : "file"), h("span", { text: "Processing " + mediaLabel(kind).toLowerCase() + "…" }), meta ? h("span", { class: "muted", text: meta }) : null)
    );
    if (kind === "image" || kind === "video") sizeHint(box, width, height, 420);
    return box;
  }
  if (status === "rejected") {
    return h(
      "div",
      { class: "part callout callout-warn media-rejected", data: data },
      icon("alert"),
      h("div", { class: "callout-body" }, h("p", { class: "callout-title", text: mediaLabel(kind) + " couldn't be stored" }), h("p", { class: "callout-text", text: (asset && asset.reason) || "The file was rejected." }), meta ? h("p", { class: "callout-meta", text: meta }) : null)
    );
  }

  const safe = safeMediaSrc(src, kind);
  if (!safe) {
    return h("div", { class: "part callout callout-warn", data: data }, icon("alert"), h("p", { class: "callout-text", text: mediaLabel(kind) + " has an unsupported source and was not loaded." }));
  }

  if (kind === "image") {
    const thumb = asset ? safeMediaSrc(asset.thumbnailUrl, "image") || safe : safe;
    const img = h("img", { attrs: { src: thumb, alt: filename || "Image from the tool result", loading: "lazy", decoding: "async", width: width || null, height: height || null } });
    return h(
      "figure",
      { class: "part media media-image", data: data },
      h("button", { class: "media-thumb", attrs: { type: "button", "aria-label": "Open image" + (filename ? " " + filename : "") }, data: { action: "lightbox", src: safe, alt: filename || "Image" } }, img, h("span", { class: "media-zoom", attrs: { "aria-hidden": "true" } }, icon("expand"))),
      meta && (filename || asset) ? h("figcaption", { class: "media-caption", text: meta }) : null
    );
  }

  const playable = toBlobUrl(safe, kind);
  if (!playable) {
    return h("div", { class: "part callout callout-warn", data: data }, icon("alert"), h("p", { class: "callout-text", text: mediaLabel(kind) + " data is damaged and could not be loaded." }));
  }
  if (kind === "audio") {
    return h(
      "figure",
      { class: "part media media-audio", data: data },
      h("div", { class: "media-audio-head" }, h("span", { class: "media-file-icon" }, icon("music")), h("span", { class: "media-audio-name", text: filename || "Audio" }), h("span", { class: "muted", text: [part.mimeType, size ? formatBytes(size) : ""].filter(Boolean).join(" · ") })),
      h("audio", { attrs: { controls: true, preload: "metadata", src: playable } })
    );
  }
  const canPlay = function (mime) {
    const probe = document.createElement(kind === "audio" ? "audio" : "video");
    return !!(probe.canPlayType && probe.canPlayType(mime || ""));
  };
  if (kind === "video" && !canPlay(part.mimeType)) {
    // A format this browser cannot play (e.g. AVI): show the poster and offer the file.
    const still = asset ? safeMediaSrc(asset.posterUrl || asset.thumbnailUrl, "image") : null;
    return h(
      "figure",
      { class: "part media media-video is-unplayable", data: data },
      still ? h("img", { attrs: { src: still, alt: (filename || "Video") + " (first frame)", loading: "lazy" } }) : null,
      h(
        "a",
        { class: "file-card", attrs: { href: playable, download: filename || "video", rel: "noopener" } },
        h("span", { class: "media-file-icon", attrs: { "aria-hidden": "true" } }, icon("video")),
        h("span", { class: "file-card-text" }, h("span", { class: "file-card-name", text: filename || "Video" }), h("span", { class: "file-card-meta", text: [part.mimeType, size ? formatBytes(size) : "", "this browser cannot play it"].filter(Boolean).join(" · ") })),
        h("span", { class: "file-card-action" }, icon("download"), "Download")
      )
    );
  }
  if (kind === "video") {
    const poster = asset ? safeMediaSrc(asset.posterUrl || asset.thumbnailUrl, "image") : null;
    const video = h("video", { attrs: { controls: true, preload: "metadata", playsinline: true, src: playable, poster: poster, width: width || null, height: height || null } });
    return h("figure", { class: "part media media-video", data: data }, video, meta ? h("figcaption", { class: "media-caption", text: meta }) : null);
  }
  const name = filename || "download";
  return h(
    "a",
    { class: "part file-card", data: data, attrs: { href: playable, download: name, rel: "noopener" } },
    h("span", { class: "media-file-icon", attrs: { "aria-hidden": "true" } }, icon("file")),
    h("span", { class: "file-card-text" }, h("span", { class: "file-card-name", text: name }), h("span", { class: "file-card-meta", text: [part.mimeType, size ? formatBytes(size) : ""].filter(Boolean).join(" · ") })),
    h("span", { class: "file-card-action" }, icon("download"), "Download")
  );
}
