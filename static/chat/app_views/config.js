/* The app view host's protocol constants and limits. */

export const HOST_INFO = { name: "Atrium", version: "1.0.0" };
export const PROTOCOL_VERSION = "2026-01-26";
export const KNOWN_PROTOCOLS = ["2026-01-26", "2025-11-21"];
export const OUTER_SANDBOX = "allow-scripts allow-same-origin allow-forms";
export const INNER_SANDBOX = "allow-scripts allow-same-origin allow-forms";
export const MODES = ["inline", "fullscreen", "pip", "split"]; // split: the side pane (side_pane.js)
export const MIN_HEIGHT = 60;
export const MAX_HEIGHT = 4000;
export const INITIAL_HEIGHT = 180;
export const LAZY_MARGIN = "600px 0px 600px 0px";
export const TEARDOWN_WAIT_MS = 3000;
export const VIEW_CALL_WAIT_MS = 15 * 60 * 1000 + 30000; // the server's VIEW_CALL_WAIT, and a margin
export const PROXY_READY_TIMEOUT_MS = 20000;
export const FLIP_LIMIT = 4; // direction changes per second before the height freezes
export const FREEZE_MS = 2000;
export const LOG_BURST = 20; // notifications/message per 10 s per view
export const BAD_SCHEMES = ["javascript:", "data:", "file:", "vbscript:", "blob:", "about:", "chrome:", "filesystem:"];
export const FINAL = ["success", "error", "cancelled", "rejected"];
export const MAX_MESSAGE_DEPTH = 100; // a view message nested deeper is refused (-32600)
