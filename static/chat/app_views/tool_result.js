/* A tool call's canonical result → the MCP CallToolResult an app view receives. */

/** A whole CallToolResult from a canonical result (mirrors chat/view_bridge.call_tool_result). */
export function callToolResult(canonical) {
  if (!canonical || typeof canonical !== "object") return null;
  const content = [];
  (canonical.parts || []).forEach(function (part) {
    if (!part || typeof part !== "object") return;
    if (part.type === "text") {
      content.push({ type: "text", text: String(part.text || "") });
      return;
    }
    if ((part.type === "image" || part.type === "file") && typeof part.src === "string") {
      const m = /^data:([^;,]+);base64,(.*)$/.exec(part.src);
      const kind = part.type === "file" ? part.mediaKind || "image" : "image";
      if (m && (kind === "image" || kind === "audio")) {
        content.push({ type: kind, mimeType: m[1], data: m[2] });
        return;
      }
    }
    if (part.type === "link" && part.uri) {
      content.push({ type: "resource_link", uri: part.uri, name: part.name || part.uri });
      return;
    }
    if (part.type === "ui") return;
    const label = describePart(part);
    if (label) content.push({ type: "text", text: label });
  });
  const meta = canonical.meta && typeof canonical.meta === "object" ? canonical.meta : {};
  const result = { content: content, isError: !!meta.isError };
  if (canonical.structured !== null && canonical.structured !== undefined) result.structuredContent = canonical.structured;
  if (canonical.uiMeta && typeof canonical.uiMeta === "object" && Object.keys(canonical.uiMeta).length) result._meta = canonical.uiMeta;
  return result;
}

function describePart(part) {
  if (part.type === "image" || part.type === "file") {
    const label = part.type === "image" ? "image" : { image: "image", audio: "audio", video: "video" }[part.mediaKind] || "file";
    const details = [part.mimeType, part.filename].filter(function (x) {
      return typeof x === "string" && x;
    });
    return "[" + label + (details.length ? ": " + details.join(", ") : "") + "]";
  }
  if (part.type === "error") return part.message ? "[error: " + part.message + "]" : "[error]";
  return null;
}
