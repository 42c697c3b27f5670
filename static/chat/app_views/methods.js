/* The view-bridge methods: the browser's copy of the server's table
 * (chat/actions/view_methods.py; tests/chat/test_view_methods.py checks that they agree,
 * so the array below stays JSON: quoted keys, no trailing commas, no comments inside).
 *
 * side "server": the host forwards it (view.request / view.notify) and the server decides;
 * side "host": the browser handles it alone. host_bridge.js gives some rows a host step
 * (a card, a confirmation, the handshake). Browser-only fields: "pace", how a forwarded
 * notification is paced ("burst": at most LOG_BURST per 10 s per view; "latest": the last
 * one each second).
 * Adding a method: a row here and in view_methods.py, its handler, its test.
 */
export const VIEW_METHODS = [
  { "name": "tools/call", "message": "request", "side": "server", "aliases": [] },
  { "name": "resources/read", "message": "request", "side": "server", "aliases": [] },
  { "name": "resources/list", "message": "request", "side": "server", "aliases": [] },
  { "name": "resources/templates/list", "message": "request", "side": "server", "aliases": [] },
  { "name": "prompts/list", "message": "request", "side": "server", "aliases": [] },
  { "name": "ui/message", "message": "request", "side": "server", "aliases": [] },
  { "name": "ui/update-model-context", "message": "request", "side": "server", "aliases": [] },
  { "name": "ui/open-link", "message": "request", "side": "server", "aliases": [] },
  { "name": "ui/request-display-mode", "message": "request", "side": "server", "aliases": [] },
  { "name": "ui/download-file", "message": "request", "side": "server", "aliases": [] },
  { "name": "atrium/setWidgetState", "message": "request", "side": "server", "aliases": [] },
  { "name": "openai/requestModal", "message": "request", "side": "server", "aliases": [] },
  { "name": "openai/setOpenInAppUrl", "message": "request", "side": "server", "aliases": [] },
  { "name": "openai/uploadFile", "message": "request", "side": "server", "aliases": [] },
  { "name": "openai/getFileDownloadUrl", "message": "request", "side": "server", "aliases": [] },
  { "name": "openai/selectFiles", "message": "request", "side": "server", "aliases": [] },
  { "name": "ping", "message": "request", "side": "server", "aliases": [] },
  { "name": "sampling/createMessage", "message": "request", "side": "server", "aliases": [] },
  { "name": "notifications/message", "message": "notification", "side": "server", "aliases": ["ui/log"], "pace": "burst" },
  { "name": "ui/notifications/size-changed", "message": "notification", "side": "server", "aliases": [], "pace": "latest" },
  { "name": "ui/notifications/request-teardown", "message": "notification", "side": "server", "aliases": [] },
  { "name": "ui/initialize", "message": "request", "side": "host", "aliases": [] },
  { "name": "ui/notifications/sandbox-proxy-ready", "message": "notification", "side": "host", "aliases": [] },
  { "name": "ui/notifications/initialized", "message": "notification", "side": "host", "aliases": [] },
  { "name": "ui/notifications/sandbox-escape", "message": "notification", "side": "host", "aliases": [] },
  { "name": "notifications/tools/list_changed", "message": "notification", "side": "host", "aliases": [] }
];

const byName = new Map();
for (const row of VIEW_METHODS) {
  for (const name of [row.name].concat(row.aliases)) byName.set(row.message + " " + name, row);
}

/** The row of a request or notification named `name` (or one of its aliases), or null. */
export function viewMethod(name, message) {
  return byName.get(message + " " + name) || null;
}
