/* An app view and the thread's files (issue 26 part 4; docs/files.md "App views and files").
 *
 * - uploadFile (Apps SDK): the view hands its File to the host (postMessage clones it); the
 *   server decides (openai/uploadFile) and gives a ticket; the host sends the body exactly
 *   as it sends a member's attachment (PUT /media/uploads/body/<ticket>/: same limits,
 *   staging, sniffing, worker), then asks for the file's id, which it gives the view.
 * - selectFiles (Apps SDK): the host's own chooser, a dialog outside the frame (host
 *   chrome; the view cannot script it): the thread's files, or a new one uploaded there.
 *   The view learns only what its person chose (view.files_choose answers their fileIds).
 * - ui/download-file: the server saves the view's file in the thread ("<app> saved …",
 *   render/files.js); its chip there is the download, for every member.
 *
 * Uses its view's bridge (forward to the server, answer the view, its client). */
import { h, icon } from "../dom.js";
import { formatBytes } from "../format.js";
import { safeMediaSrc } from "../safe_urls.js";
import { typeName } from "../render/files.js";
import { request, rpcError } from "./rpc.js";

const MAX_CHOSEN = 10;

function isBlob(value) {
  return typeof Blob !== "undefined" && value instanceof Blob;
}

/** The body of one upload, sent to the ticket's URL (app origin, as for attachments). */
function sendBody(uploadUrl, blob) {
  return fetch(uploadUrl, { method: "PUT", body: blob, credentials: "same-origin", headers: { "Content-Type": "application/octet-stream" } }).then((response) =>
    response.json().then(
      (body) => {
        if (!response.ok || !body || !body.ok) {
          const error = (body && body.error) || {};
          throw { code: error.code || "upload_failed", message: error.message || "The upload failed.", jsonrpcCode: -32000 };
        }
        return body.attachment;
      },
      () => {
        throw { code: "upload_failed", message: "The upload failed (" + response.status + ").", jsonrpcCode: -32000 };
      }
    )
  );
}

/** One file through the view's upload path: decided, its body sent, its fileId. */
export function uploadForView(bridge, file, compat) {
  const base = compat ? { _compat: compat } : {};
  const name = typeof file.name === "string" && file.name ? file.name : "file";
  return bridge
    .forward("openai/uploadFile", Object.assign({ filename: name, size: file.size }, base))
    .then((ticket) => sendBody(ticket.uploadUrl, file))
    .then((part) => bridge.forward("openai/uploadFile", Object.assign({ assetId: part && part.asset ? part.asset.id : null }, base)).then((described) => ({ described, part })));
}

export class ViewFiles {
  constructor(bridge) {
    this.bridge = bridge;
    this.dialog = null;
  }

  /** Apps SDK uploadFile(file) → {fileId, fileName, mimeType, size}. */
  upload(id, params) {
    const bridge = this.bridge;
    if (!isBlob(params.file)) {
      bridge.respondError(id, { code: -32602, message: "uploadFile needs a File.", data: { reason: "invalid_params" } });
      return;
    }
    uploadForView(bridge, params.file, params._compat).then(
      ({ described }) => bridge.respond(id, described),
      (err) => bridge.respondError(id, rpcError(err))
    );
  }

  /** ui/download-file: the server saves it in the thread; the answer is the view's. */
  save(id, params) {
    const bridge = this.bridge;
    bridge.forward("ui/download-file", params).then(
      () => bridge.respond(id, {}),
      (err) => bridge.respondError(id, rpcError(err))
    );
  }

  /** Apps SDK selectFiles({multiple?}) → {files: [{fileId, fileName, mimeType, size}]}. */
  select(id, params) {
    const bridge = this.bridge;
    if (this.dialog) {
      bridge.respondError(id, { code: -32000, message: "The file chooser is already open.", data: { reason: "card_pending" } });
      return;
    }
    const multiple = params.multiple === true;
    bridge.forward("openai/selectFiles", { _compat: params._compat || "openai" }).then(
      (offer) => {
        if (bridge.isClosed()) return;
        this.open(id, offer || {}, multiple);
      },
      (err) => bridge.respondError(id, rpcError(err))
    );
  }

  open(id, offer, multiple) {
    const bridge = this.bridge;
    const appName = typeof offer.appName === "string" && offer.appName ? offer.appName : bridge.appName();
    const files = Array.isArray(offer.files) ? offer.files.slice() : [];
    const chosen = new Set();
    let answered = false;
    const list = h("ul", { class: "file-chooser-list", attrs: { role: "listbox", "aria-multiselectable": multiple ? "true" : "false", "aria-label": "Files in this thread" } });
    const status = h("p", { class: "file-chooser-status", attrs: { role: "status" } });
    const share = h("button", { class: "btn btn-primary btn-sm", attrs: { type: "button", disabled: true, "data-chooser": "share" }, text: "Share with " + appName });
    const picker = h("input", { class: "file-chooser-input", attrs: { type: "file", hidden: true, "aria-hidden": "true", tabindex: "-1" } });
    const uploadButton = h("button", { class: "btn btn-secondary btn-sm", attrs: { type: "button", "data-chooser": "upload" } }, "Upload a new file");

    const refresh = () => {
      share.disabled = chosen.size === 0;
      share.textContent = chosen.size > 1 ? "Share " + chosen.size + " files with " + appName : "Share with " + appName;
      list.querySelectorAll("[data-asset-id]").forEach((row) => {
        const on = chosen.has(Number(row.dataset.assetId));
        row.classList.toggle("is-chosen", on);
        row.setAttribute("aria-selected", on ? "true" : "false");
        const box = row.querySelector("input");
        if (box) box.checked = on;
      });
    };
    const toggle = (assetId) => {
      if (chosen.has(assetId)) chosen.delete(assetId);
      else {
        if (!multiple) chosen.clear();
        if (chosen.size >= MAX_CHOSEN) return;
        chosen.add(assetId);
      }
      refresh();
    };
    const row = (part) => {
      const asset = part.asset || {};
      const thumb = asset.status === "ready" ? safeMediaSrc(asset.thumbnailUrl, "image") : null;
      const meta = [typeName(part.mimeType), part.size ? formatBytes(part.size) : "", asset.status === "staged" ? "processing…" : ""].filter(Boolean).join(" · ");
      const box = h("input", { attrs: { type: multiple ? "checkbox" : "radio", name: "file-chooser-" + bridge.id, tabindex: "-1", "aria-hidden": "true" } });
      const item = h(
        "li",
        { class: "file-chooser-item", data: { assetId: asset.id }, attrs: { role: "option", tabindex: "0", "aria-selected": "false", title: part.filename } },
        box,
        thumb ? h("img", { class: "file-chip-thumb", attrs: { src: thumb, alt: "", loading: "lazy" } }) : h("span", { class: "file-chip-icon", attrs: { "aria-hidden": "true" } }, icon(part.mediaKind === "image" ? "image" : "file")),
        h("span", { class: "file-chip-text" }, h("span", { class: "file-chip-name", text: part.filename || "file" }), h("span", { class: "file-chip-meta", text: meta }))
      );
      item.addEventListener("click", () => toggle(asset.id));
      item.addEventListener("keydown", (event) => {
        if (event.key === " " || event.key === "Enter") {
          event.preventDefault();
          toggle(asset.id);
        }
      });
      return item;
    };
    const render = () => {
      list.replaceChildren(...files.map(row));
      if (!files.length) list.appendChild(h("li", { class: "file-chooser-empty", text: "No files in this thread yet. Upload one." }));
      refresh();
    };

    const finish = (outcome) => {
      if (answered) return;
      answered = true;
      if (outcome) bridge.respond(id, outcome);
      else bridge.respondError(id, { code: -32000, message: "The person closed the file chooser.", data: { reason: "user_dismissed" } });
      if (dialog.open) dialog.close();
    };
    share.addEventListener("click", () => {
      if (!chosen.size) return;
      share.disabled = true;
      status.textContent = "Sharing…";
      request(bridge.client, { type: "view.files_choose", token: bridge.token, assetIds: Array.from(chosen) }).then(
        (reply) => finish({ files: (reply && reply.files) || [] }),
        (err) => {
          status.textContent = (err && err.message) || "Could not share the files.";
          status.classList.add("is-error");
          refresh();
        }
      );
    });
    uploadButton.addEventListener("click", () => picker.click());
    picker.addEventListener("change", () => {
      const file = picker.files && picker.files[0];
      picker.value = "";
      if (!file) return;
      status.classList.remove("is-error");
      status.textContent = "Uploading " + file.name + "…";
      uploadButton.disabled = true;
      uploadForView(bridge, file, "openai").then(
        ({ part }) => {
          uploadButton.disabled = false;
          status.textContent = "Uploaded " + part.filename + ".";
          files.unshift(part);
          if (!multiple) chosen.clear();
          if (chosen.size < MAX_CHOSEN) chosen.add(part.asset.id);
          render();
        },
        (err) => {
          uploadButton.disabled = false;
          status.textContent = (err && err.message) || "The upload failed.";
          status.classList.add("is-error");
        }
      );
    });

    const cancel = h("button", { class: "btn btn-secondary btn-sm", attrs: { type: "button", "data-chooser": "cancel" }, text: "Cancel" });
    cancel.addEventListener("click", () => finish(null));
    const dialog = h(
      "dialog",
      { class: "view-modal file-chooser", attrs: { "aria-label": appName + " asks for files" } },
      h("div", { class: "view-modal-head" }, h("div", { class: "view-modal-title" }, icon("file"), h("strong", { class: "view-modal-app", text: appName + " asks for " + (multiple ? "files" : "a file") }))),
      h(
        "div",
        { class: "file-chooser-body" },
        h("p", { class: "file-chooser-note", text: "Choose from this thread's files, or upload a new one. " + appName + " gets only what you share." }),
        list,
        status
      ),
      h("div", { class: "file-chooser-foot" }, uploadButton, picker, h("span", { class: "view-spacer" }), cancel, share)
    );
    dialog.addEventListener("close", () => {
      finish(null);
      this.dialog = null;
      if (dialog.parentNode) dialog.parentNode.removeChild(dialog);
    });
    this.dialog = dialog;
    document.body.appendChild(dialog);
    render();
    try {
      dialog.showModal();
    } catch (e) {
      dialog.setAttribute("open", "");
    }
  }

  /** The view goes: its chooser with it (answered as dismissed). */
  close() {
    if (this.dialog) this.dialog.close();
  }
}
