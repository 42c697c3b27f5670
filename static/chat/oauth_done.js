/* The OAuth result page after a sign-in that worked: tell the conversation's tabs, so a
 * view whose call waited for this sign-in sends it again (app_views/sign_in_retry.js). */
if (typeof BroadcastChannel !== "undefined") {
  const channel = new BroadcastChannel("atrium-oauth");
  channel.postMessage({ type: "connected" });
  channel.close();
}
// Said: this tab may now be closed (a tab closed before this line told nobody).
document.body.dataset.oauthAnnounced = "true";
