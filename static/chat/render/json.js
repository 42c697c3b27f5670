/* Pretty, syntax-highlighted JSON in a <pre>. */
import { h } from "../dom.js";

const JSON_TOKEN = /("(?:\\u[a-fA-F0-9]{4}|\\[^u]|[^\\"])*"(\s*:)?|\b(?:true|false|null)\b|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/g;

export function renderJson(value, cls) {
  let text;
  try {
    text = JSON.stringify(value, null, 2);
  } catch (e) {
    text = String(value);
  }
  if (text === undefined) text = "undefined";
  const code = h("code");
  let last = 0;
  let match;
  JSON_TOKEN.lastIndex = 0;
  while ((match = JSON_TOKEN.exec(text))) {
    if (match.index > last) code.appendChild(document.createTextNode(text.slice(last, match.index)));
    const token = match[0];
    let kind = "num";
    if (token.charAt(0) === '"') kind = match[2] ? "key" : "str";
    else if (token === "true" || token === "false") kind = "bool";
    else if (token === "null") kind = "null";
    code.appendChild(h("span", { class: "j-" + kind, text: token }));
    last = match.index + token.length;
  }
  if (last < text.length) code.appendChild(document.createTextNode(text.slice(last)));
  return h("pre", { class: "code-block json" + (cls ? " " + cls : "") }, code);
}
