/* Which URLs the host page loads or links to, and data: payloads turned into blob: URLs. */

function schemeOf(url) {
  const m = /^([a-zA-Z][a-zA-Z0-9+.-]*):/.exec(String(url || "").trim());
  return m ? m[1].toLowerCase() : "";
}

/** Media sources we load: same-origin paths, http(s), blob:, and data: of the given kind. */
export function safeMediaSrc(src, kind) {
  if (typeof src !== "string" || !src) return null;
  const scheme = schemeOf(src);
  if (!scheme) return /^\/(?!\/)/.test(src) ? src : null;
  if (scheme === "http" || scheme === "https" || scheme === "blob") return src;
  if (scheme === "data") {
    const mime = src.slice(5).split(/[;,]/)[0].toLowerCase();
    if (kind === "binary" || mime.indexOf(kind + "/") === 0) return src;
  }
  return null;
}

export function safeLinkHref(uri) {
  const scheme = schemeOf(uri);
  return scheme === "http" || scheme === "https" || scheme === "mailto" ? uri : null;
}

// The host page's CSP allows media from 'self' and blob: only, so inline audio/video/file
// payloads (data: URIs) are turned into blob: URLs, once per distinct source.
const blobCache = new Map();

// A blob: URL belongs to the app origin: one typed text/html (or SVG, XML...) would run
// the app's content there if opened. Only audio/video keep their type (the players need
// it); everything else is an opaque application/octet-stream.
export function toBlobUrl(src, kind) {
  if (schemeOf(src) !== "data") return src;
  const cacheKey = (kind || "") + "|" + src;
  if (blobCache.has(cacheKey)) return blobCache.get(cacheKey);
  let url = src;
  try {
    const comma = src.indexOf(",");
    const header = src.slice(5, comma);
    const body = src.slice(comma + 1);
    const declared = (header.split(";")[0] || "").toLowerCase();
    const playable = (kind === "audio" || kind === "video") && declared.indexOf(kind + "/") === 0;
    const mime = playable ? declared : "application/octet-stream";
    let bytes;
    if (/;base64$/i.test(header)) {
      const bin = atob(body);
      bytes = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    } else {
      bytes = new TextEncoder().encode(decodeURIComponent(body));
    }
    url = URL.createObjectURL(new Blob([bytes], { type: mime }));
  } catch (e) {
    url = null;
  }
  blobCache.set(cacheKey, url);
  return url;
}
