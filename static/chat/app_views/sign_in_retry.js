/* A view's call that needs a sign-in (the server answered 401, or 403 insufficient_scope:
 * the call ends `authorization_required`): its Connect card shows beside the view
 * (call_group.js keeps it out of the group), and the view's request is not answered yet.
 * When the person finishes signing in — in the tab the Connect card opened, whose result
 * page announces it on a BroadcastChannel (static/chat/oauth_done.js) — the host sends the
 * request again and the view gets that answer, not the sign-in error. */
const CHANNEL = "atrium-oauth";
const WAIT_MS = 10 * 60 * 1000; // then the view gets the original error
const waiting = new Set();
let channel = null;

function listen() {
  if (channel || typeof BroadcastChannel === "undefined") return;
  channel = new BroadcastChannel(CHANNEL);
  channel.onmessage = (event) => {
    const data = event.data;
    if (!data || data.type !== "connected") return;
    const resolvers = Array.from(waiting);
    waiting.clear();
    resolvers.forEach((resolve) => resolve());
  };
}

/** Whether a refused view request is one a sign-in can fix. */
export function needsSignIn(err) {
  return !!err && err.code === "authorization_required";
}

/** Resolves once a sign-in completes in this browser; rejects with `err` after WAIT_MS
 *  or when `closed()` says the view went away meanwhile. */
export function afterSignIn(err, closed) {
  listen();
  if (!channel) return Promise.reject(err);
  return new Promise((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      if (closed()) reject(err);
      else resolve();
    };
    const timer = setTimeout(() => {
      waiting.delete(done);
      reject(err);
    }, WAIT_MS);
    waiting.add(done);
  });
}
