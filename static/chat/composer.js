/* The composer: Enter sends, Shift+Enter newline; the slash-command popup
 * (composer_slash.js) and the tool picker (tool_picker.js) are wired here. */
import { bindSlash, closeSlash, slashKeydown, updateSlash } from "./composer_slash.js";
import { send } from "./socket.js";
import { scrollToBottom } from "./timeline.js";
import { toast } from "./toasts.js";
import { canAct, els } from "./thread_state.js";
import { bindToolPicker, closePicker, openPicker } from "./tool_picker.js";
import { bindAttachments, clearFiles, fileIds, hasFiles, sendAfterUploads, setAttachEnabled, uploadsPending } from "./attachments.js";
import { bindPromptPicker } from "./prompt_picker.js";
import { bindResourcePicker, clearPending, pendingResources } from "./resource_picker.js";

export function setComposerEnabled(enabled, placeholder) {
  if (!els.input) return;
  els.input.disabled = !enabled;
  if (placeholder) els.input.placeholder = placeholder;
  if (els.sendBtn) els.sendBtn.disabled = !enabled || !els.input.value.trim();
  if (els.toolBtn) els.toolBtn.disabled = !enabled;
  setAttachEnabled(enabled); // attachments.js
  els.composer.classList.toggle("is-readonly", !enabled);
  if (!enabled) {
    closeSlash();
    closePicker(false);
  }
}

const MAX_INPUT_HEIGHT = 240;

function autogrow() {
  const input = els.input;
  input.style.height = "auto";
  const height = Math.min(input.scrollHeight, MAX_INPUT_HEIGHT);
  input.style.height = height + "px";
  input.style.overflowY = input.scrollHeight > MAX_INPUT_HEIGHT ? "auto" : "hidden";
}

function updateSendState() {
  if (els.sendBtn) els.sendBtn.disabled = els.input.disabled || (!els.input.value.trim() && !hasFiles());
}

function restoreDraft(text) {
  if (!els.input.value.trim()) {
    els.input.value = text;
    autogrow();
    updateSendState();
  }
}

function submit() {
  if (!canAct() || els.input.disabled) return;
  const text = els.input.value.trim();
  if (!text && !hasFiles()) return;
  if (uploadsPending()) return sendAfterUploads(submit); // sent once its files are stored
  const ids = fileIds(); // attached files (attachments.js)
  els.input.value = "";
  autogrow();
  updateSendState();
  closeSlash();
  scrollToBottom();
  const resources = pendingResources(); // server resources attached (resource_picker.js)
  if (resources.length) clearPending();
  const payload = resources.length ? { type: "message.post_resources", text: text, resources: resources } : { type: "message.post", text: text };
  if (ids.length) payload.attachments = ids;
  send(payload).then(
    function (reply) {
      if (reply.ok && ids.length) clearFiles();
      if (!reply.ok) {
        restoreDraft(text);
        toast((reply.error && reply.error.message) || "Your message was not sent.", "error");
      }
    },
    function (err) {
      restoreDraft(text);
      toast(err.message + " Your message may not have been sent.", "error");
    }
  );
}

export function bindComposer() {
  if (!els.input || els.input.disabled || !els.sendBtn) return;
  els.composer.addEventListener("submit", function (event) {
    event.preventDefault();
    submit();
  });
  els.input.addEventListener("input", function () {
    autogrow();
    updateSendState();
    updateSlash();
  });
  els.input.addEventListener("keydown", (event) => {
    if (event.isComposing || event.keyCode === 229) return;
    if (slashKeydown(event)) return;
    if (event.key === "Enter" && !event.shiftKey && !event.altKey && !event.ctrlKey && !event.metaKey) {
      event.preventDefault();
      submit();
    }
  });
  const edited = () => {
    autogrow();
    updateSendState();
  };
  bindSlash({ submit, edited, openPicker });
  bindToolPicker({ edited, closeSlash });
  bindPromptPicker();
  bindResourcePicker({ edited });
  bindAttachments({ edited });
  autogrow();
  updateSendState();
}
