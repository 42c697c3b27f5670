/* The thread as the page was served (chat/views.py embeds it with json_script). */

export function readThreadSnapshot(root) {
  try {
    const embedded = document.getElementById("thread-snapshot");
    if (embedded) return JSON.parse(embedded.textContent);
  } catch (e) {
    console.error("Atrium: the thread snapshot could not be read", e);
  }
  return { threadId: Number(root.dataset.threadId), lastSeq: 0, messages: [], toolCalls: [] };
}
