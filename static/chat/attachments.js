/* Files attached to the next message (docs/files.md): the attach button, drag and drop
 * onto the thread, paste (screenshots). Each file is announced (name, size → the server
 * checks role, name and limits before a byte is sent), then its body is PUT to the ticket
 * URL with a progress bar and a cancel button. The composer (composer.js) sends the
 * message once every file is stored, with their ids. */
import { h, icon } from "./dom.js";
import { formatBytes } from "./format.js";
import { toast } from "./toasts.js";
import { canAct, root } from "./thread_state.js";

const MAX_FILES = 10; // per message (chat.media.attachments.MAX_FILES_PER_MESSAGE)

const items = []; // {file, name, el, bar, state: uploading|done|error, id, xhr, note}
let tray = null;
let button = null;
let input = null;
let hooks = { edited: function () {} };
let afterUploads = null;

function csrfToken() {
  const fromTray = tray && tray.dataset.csrf;
  if (fromTray) return fromTray;
  const field = document.querySelector("input[name=csrfmiddlewaretoken]");
  return field ? field.value : "";
}

export function hasFiles() {
  return items.length > 0;
}

export function uploadsPending() {
  return items.some(function (it) {
    return it.state === "uploading" || it.state === "error";
  });
}

export function fileIds() {
  return items
    .filter(function (it) {
      return it.state === "done";
    })
    .map(function (it) {
      return it.id;
    });
}

export function clearFiles() {
  items.splice(0, items.length);
  afterUploads = null;
  render();
}

export function setAttachEnabled(enabled) {
  if (button) button.disabled = !enabled;
}

/** Call `fn` once every upload has finished; a failed file blocks until removed. */
export function sendAfterUploads(fn) {
  if (items.some((it) => it.state === "error")) {
    toast("Remove the files that could not be attached, then send again.", "error");
    return;
  }
  afterUploads = fn;
  if (tray) tray.classList.add("is-waiting");
}

function settle() {
  hooks.edited();
  if (afterUploads && !uploadsPending()) {
    const fn = afterUploads;
    afterUploads = null;
    if (tray) tray.classList.remove("is-waiting");
    fn();
  }
}

function pastedName(file, index) {
  if (file.name && file.name !== "image.png") return file.name;
  const now = new Date();
  const pad = (n) => String(n).padStart(2, "0");
  const stamp = now.getFullYear() + "-" + pad(now.getMonth() + 1) + "-" + pad(now.getDate()) + " " + pad(now.getHours()) + "." + pad(now.getMinutes()) + "." + pad(now.getSeconds());
  const ext = (file.type.split("/")[1] || "png").replace("jpeg", "jpg");
  return "Screenshot " + stamp + (index ? " (" + (index + 1) + ")" : "") + "." + ext;
}

function fail(item, message) {
  item.state = "error";
  item.error = message || "The file could not be attached.";
  item.xhr = null;
  render();
  settle();
}

function upload(item) {
  item.state = "uploading";
  item.loaded = 0;
  item.error = null;
  render();
  fetch(tray.dataset.uploadUrl, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
    body: JSON.stringify({ filename: item.name, size: item.file.size }),
  })
    .then(function (response) {
      return response.json().catch(function () {
        return { ok: false, error: { message: "The server answered " + response.status + "." } };
      });
    })
    .then(function (answer) {
      if (item.cancelled) return;
      if (!answer.ok) return fail(item, answer.error && answer.error.message);
      item.name = answer.filename || item.name;
      item.note = answer.note || null;
      const xhr = new XMLHttpRequest();
      item.xhr = xhr;
      xhr.open("PUT", answer.uploadUrl);
      xhr.setRequestHeader("Content-Type", "application/octet-stream");
      xhr.upload.addEventListener("progress", function (event) {
        if (!event.lengthComputable) return;
        item.loaded = event.loaded;
        updateBar(item);
      });
      xhr.addEventListener("load", function () {
        let body = null;
        try {
          body = JSON.parse(xhr.responseText);
        } catch (e) {
          body = null;
        }
        if (xhr.status === 201 && body && body.ok) {
          item.state = "done";
          item.id = body.attachment.asset.id;
          item.kind = body.attachment.mediaKind;
          item.xhr = null;
          render();
          settle();
        } else {
          fail(item, (body && body.error && body.error.message) || "The upload failed (" + xhr.status + ").");
        }
      });
      xhr.addEventListener("error", function () {
        fail(item, "The upload was interrupted; nothing was stored. Retry or remove the file.");
      });
      xhr.send(item.file);
    })
    .catch(function () {
      if (!item.cancelled) fail(item, "The server could not be reached.");
    });
}

/** Add files (from the picker, a drop or a paste). */
export function addFiles(fileList, pasted) {
  if (!tray || !canAct()) return;
  const files = Array.prototype.slice.call(fileList || []);
  let added = 0;
  files.forEach(function (file, index) {
    if (items.length >= MAX_FILES) {
      if (index === files.length - 1 || added === 0) toast("A message can carry at most " + MAX_FILES + " files.", "error");
      return;
    }
    const item = { file: file, name: pasted ? pastedName(file, index) : file.name || "file", state: "uploading", loaded: 0 };
    items.push(item);
    added += 1;
    if (file.size === 0) {
      fail(item, "“" + item.name + "” is empty (0 bytes), so it was not attached.");
      return;
    }
    upload(item);
  });
  hooks.edited();
}

function remove(item) {
  item.cancelled = true;
  if (item.xhr) item.xhr.abort();
  const at = items.indexOf(item);
  if (at >= 0) items.splice(at, 1);
  render();
  settle();
}

function updateBar(item) {
  if (!item.bar) return;
  const pct = item.file.size ? Math.min(100, Math.round((item.loaded / item.file.size) * 100)) : 100;
  item.bar.style.width = pct + "%";
  item.bar.parentElement.setAttribute("aria-valuenow", String(pct));
  if (item.pct) item.pct.textContent = pct + "%";
}

function chip(item) {
  const isImage = /^image\//.test(item.file.type || "");
  let visual = h("span", { class: "upload-icon", attrs: { "aria-hidden": "true" } }, icon(isImage ? "image" : "file"));
  if (isImage && item.file.size < 20 * 1024 * 1024) {
    if (!item.preview) item.preview = URL.createObjectURL(item.file);
    visual = h("img", { class: "upload-thumb", attrs: { src: item.preview, alt: "" } });
  }
  const status =
    item.state === "error"
      ? h("span", { class: "upload-status is-error", text: item.error })
      : item.state === "done"
        ? h("span", { class: "upload-status is-done" }, icon("check"), item.note || "Ready · " + formatBytes(item.file.size))
        : h("span", { class: "upload-status" }, (item.pct = h("span", { class: "upload-pct", text: "0%" })), " of " + formatBytes(item.file.size));
  const progress =
    item.state === "uploading"
      ? h("div", { class: "upload-progress", attrs: { role: "progressbar", "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": "0", "aria-label": "Uploading " + item.name } }, (item.bar = h("div", { class: "upload-bar" })))
      : null;
  const el = h(
    "div",
    { class: "upload-chip is-" + item.state, attrs: { role: "listitem" }, data: { uploadState: item.state } },
    visual,
    h("div", { class: "upload-text" }, h("span", { class: "upload-name", text: item.name, attrs: { title: item.name } }), status, progress),
    item.state === "error"
      ? h("button", { class: "icon-btn upload-retry", attrs: { type: "button", title: "Try again", "aria-label": "Try " + item.name + " again" }, data: { uploadAction: "retry" } }, icon("reload"))
      : null,
    h("button", { class: "icon-btn upload-cancel", attrs: { type: "button", title: item.state === "uploading" ? "Cancel the upload" : "Remove", "aria-label": (item.state === "uploading" ? "Cancel " : "Remove ") + item.name }, data: { uploadAction: "remove" } }, icon("x"))
  );
  el.addEventListener("click", function (event) {
    const target = event.target instanceof Element ? event.target.closest("[data-upload-action]") : null;
    if (!target) return;
    if (target.dataset.uploadAction === "remove") remove(item);
    else if (target.dataset.uploadAction === "retry" && item.file.size > 0) upload(item);
  });
  item.el = el;
  if (item.state === "uploading") updateBar(item);
  return el;
}

function render() {
  if (!tray) return;
  tray.textContent = "";
  items.forEach(function (item) {
    item.bar = null;
    item.pct = null;
    tray.appendChild(chip(item));
  });
  tray.hidden = items.length === 0;
}

function hasDraggedFiles(event) {
  const types = event.dataTransfer && event.dataTransfer.types;
  return !!types && Array.prototype.indexOf.call(types, "Files") >= 0;
}

function bindDrop(zone) {
  let depth = 0;
  const overlay = h("div", { class: "drop-overlay", attrs: { "aria-hidden": "true" } }, h("div", { class: "drop-overlay-card" }, icon("download"), h("span", { text: "Drop files to attach them" })));
  overlay.hidden = true;
  zone.appendChild(overlay);
  zone.addEventListener("dragenter", function (event) {
    if (!hasDraggedFiles(event) || button.disabled) return;
    event.preventDefault();
    depth += 1;
    overlay.hidden = false;
  });
  zone.addEventListener("dragover", function (event) {
    if (!hasDraggedFiles(event) || button.disabled) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = "copy";
  });
  zone.addEventListener("dragleave", function () {
    depth = Math.max(0, depth - 1);
    if (!depth) overlay.hidden = true;
  });
  zone.addEventListener("drop", function (event) {
    if (!hasDraggedFiles(event)) return;
    event.preventDefault();
    depth = 0;
    overlay.hidden = true;
    if (!button.disabled) addFiles(event.dataTransfer.files, false);
  });
}

export function bindAttachments(opts) {
  tray = document.getElementById("composer-files");
  button = document.getElementById("attach-btn");
  input = document.getElementById("attach-input");
  if (!tray || !button || !input) return; // a viewer's page has none of them
  hooks = Object.assign(hooks, opts || {});
  button.addEventListener("click", function () {
    input.click();
  });
  input.addEventListener("change", function () {
    addFiles(input.files, false);
    input.value = "";
  });
  const textarea = document.getElementById("composer-input");
  if (textarea) {
    textarea.addEventListener("paste", function (event) {
      const files = event.clipboardData && event.clipboardData.files;
      if (files && files.length) {
        event.preventDefault();
        addFiles(files, true);
      }
    });
  }
  bindDrop(root);
}
