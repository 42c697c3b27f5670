/* The tool picker: the thread's tools, searchable; choosing one writes its /call with a
 * skeleton of its arguments into the composer. A tool with arguments that take a file
 * (`fileFields`, decided on the server: chat/media/tool_inputs.py) first asks which of the
 * thread's files goes in each: the /call then names it as {"$file": id}, which the server
 * checks and turns into a link or an embedded resource (docs/files.md). */
import { h, icon } from "./dom.js";
import { formatBytes } from "./format.js";
import { typeName } from "./render/files.js";
import { send } from "./socket.js";
import { canAct, els } from "./thread_state.js";

// The composer's: the input was edited, close the slash popup.
let hooks = { edited() {}, closeSlash() {} };

let tools = null;
let toolsLoadedAt = 0;
let toolsState = "idle"; // idle | loading | ready | unavailable | error
let toolsError = "";
let pickerItems = [];
let pickerActive = 0;

function pickerOpen() {
  return els.picker && !els.picker.hidden;
}

export function openPicker() {
  if (!els.picker || !canAct()) return;
  hooks.closeSlash();
  fileForm = null;
  els.picker.hidden = false;
  if (els.toolBtn) els.toolBtn.setAttribute("aria-expanded", "true");
  els.pickerSearch.value = "";
  pickerActive = 0;
  loadTools();
  renderPicker();
  els.pickerSearch.focus();
}

export function closePicker(focusInput) {
  if (!pickerOpen()) return;
  els.picker.hidden = true;
  if (els.toolBtn) els.toolBtn.setAttribute("aria-expanded", "false");
  if (focusInput && els.input) els.input.focus();
}

function loadTools() {
  if (toolsState === "loading") return;
  if (toolsState === "ready" && Date.now() - toolsLoadedAt < 60000) return;
  toolsState = "loading";
  send({ type: "tools.list" }).then(
    function (reply) {
      if (reply.ok) {
        tools = (reply.result && Array.isArray(reply.result.tools) && reply.result.tools) || [];
        toolsLoadedAt = Date.now();
        toolsState = "ready";
      } else if (reply.error && reply.error.code === "unknown_type") {
        toolsState = "unavailable";
      } else {
        toolsState = "error";
        toolsError = (reply.error && reply.error.message) || "The tool list could not be loaded.";
      }
      if (pickerOpen()) renderPicker();
    },
    function (err) {
      toolsState = "error";
      toolsError = err.message;
      if (pickerOpen()) renderPicker();
    }
  );
}

function pickerMessage(title, text) {
  els.pickerList.appendChild(h("div", { class: "picker-state" }, h("p", { class: "picker-state-title", text: title }), text ? h("p", { class: "picker-state-text", text: text }) : null));
}

let fileForm = null; // the tool whose file arguments are being chosen

function renderPicker() {
  if (fileForm) {
    renderFileForm(fileForm);
    return;
  }
  const list = els.pickerList;
  list.textContent = "";
  pickerItems = [];
  if (toolsState === "loading" || toolsState === "idle") {
    list.appendChild(h("div", { class: "picker-state" }, h("span", { class: "spinner spinner-sm", attrs: { "aria-hidden": "true" } }), h("p", { class: "picker-state-text", text: "Loading tools…" })));
    return;
  }
  if (toolsState === "unavailable") {
    pickerMessage("Tool list unavailable", "You can still run a tool by typing /call server.tool {…}.");
    return;
  }
  if (toolsState === "error") {
    pickerMessage("Tool list unavailable", toolsError);
    return;
  }
  const q = els.pickerSearch.value.trim().toLowerCase();
  const matches = (tools || []).filter(function (t) {
    if (!q) return true;
    const hay = [t.name, t.title, t.description, t.server && t.server.name, t.server && t.server.slug].join(" ").toLowerCase();
    return q.split(/\s+/).every(function (w) {
      return hay.indexOf(w) >= 0;
    });
  });
  if (!tools || !tools.length) {
    pickerMessage("No tools yet", "No app is enabled for this thread. An admin can bind MCP servers to this workspace.");
    return;
  }
  if (!matches.length) {
    pickerMessage("No matching tools", "Nothing matches “" + els.pickerSearch.value.trim() + "”.");
    return;
  }
  pickerActive = Math.min(pickerActive, matches.length - 1);
  let lastServer = null;
  matches.forEach(function (tool, i) {
    const serverName = (tool.server && (tool.server.name || tool.server.slug)) || "";
    if (serverName !== lastServer) {
      list.appendChild(h("div", { class: "picker-group", text: serverName, attrs: { role: "presentation" } }));
      lastServer = serverName;
    }
    const badges = h("span", { class: "picker-badges" });
    if (tool.hasUi) badges.appendChild(h("span", { class: "tag tag-accent", text: "App" }));
    if (tool.risk && tool.risk !== "read") badges.appendChild(h("span", { class: "risk-badge risk-" + tool.risk, text: tool.risk === "destructive" ? "Destructive" : "Write" }));
    const item = h(
      "div",
      { class: "picker-item" + (i === pickerActive ? " is-active" : ""), attrs: { role: "option", id: "picker-opt-" + i, "aria-selected": String(i === pickerActive) } },
      h("span", { class: "picker-item-icon", attrs: { "aria-hidden": "true" } }, icon(tool.hasUi ? "layout" : "wrench")),
      h(
        "span",
        { class: "picker-item-text" },
        h("span", { class: "picker-item-title" }, h("span", { text: tool.title || tool.name }), badges),
        h("code", { class: "picker-item-name", text: ((tool.server && tool.server.slug) || "") + "." + tool.name }),
        tool.description ? h("span", { class: "picker-item-desc", text: tool.description }) : null
      )
    );
    item.addEventListener("mousedown", function (event) {
      event.preventDefault();
    });
    item.addEventListener("click", function () {
      chooseTool(tool);
    });
    item.addEventListener("mousemove", function () {
      if (pickerActive !== i) {
        pickerActive = i;
        syncPickerActive();
      }
    });
    pickerItems.push({ tool: tool, el: item });
    list.appendChild(item);
  });
  syncPickerActive();
}

function syncPickerActive() {
  pickerItems.forEach(function (it, i) {
    it.el.classList.toggle("is-active", i === pickerActive);
    it.el.setAttribute("aria-selected", String(i === pickerActive));
  });
  const active = pickerItems[pickerActive];
  if (active) {
    els.pickerSearch.setAttribute("aria-activedescendant", active.el.id);
    active.el.scrollIntoView({ block: "nearest" });
  } else {
    els.pickerSearch.removeAttribute("aria-activedescendant");
  }
}

/** A JSON value for a schema: defaults, then enums, then an empty value of its type. */
function skeleton(schema, depth) {
  schema = schema && typeof schema === "object" ? schema : {};
  depth = depth || 0;
  if (schema["default"] !== undefined) return schema["default"];
  if (schema["const"] !== undefined) return schema["const"];
  if (Array.isArray(schema["enum"]) && schema["enum"].length) return schema["enum"][0];
  let type = Array.isArray(schema.type)
    ? schema.type.filter(function (t) {
        return t !== "null";
      })[0]
    : schema.type;
  if (!type && schema.properties) type = "object";
  switch (type) {
    case "string":
      return "";
    case "integer":
    case "number":
      return typeof schema.minimum === "number" ? schema.minimum : 0;
    case "boolean":
      return false;
    case "array":
      return [];
    case "object":
      const out = {};
      if (depth < 4) {
        (Array.isArray(schema.required) ? schema.required : []).forEach(function (key) {
          out[key] = skeleton((schema.properties || {})[key], depth + 1);
        });
      }
      return out;
    default:
      return null;
  }
}

/** "report.pdf · PDF · 1.2 MB" */
function fileLabel(file) {
  return [file.name, typeName(file.mimeType), formatBytes(file.size)].filter(Boolean).join(" · ");
}

function renderFileForm(tool) {
  const list = els.pickerList;
  list.textContent = "";
  pickerItems = [];
  const name = ((tool.server && tool.server.slug) || "") + "." + tool.name;
  const form = h("form", { class: "context-form tool-file-form", attrs: { autocomplete: "off", "aria-label": "Files for " + name } });
  form.appendChild(
    h(
      "div",
      { class: "context-form-head" },
      h("button", { class: "btn btn-ghost btn-xs", text: "‹ Back", attrs: { type: "button" }, on: { click: function () { fileForm = null; renderPicker(); els.pickerSearch.focus(); } } }),
      h("span", { class: "context-form-title", text: tool.title || tool.name }),
      h("span", { class: "picker-item-name", text: name })
    )
  );
  const files = tool._files;
  if (!files) {
    form.appendChild(h("div", { class: "picker-state" }, h("span", { class: "spinner spinner-sm", attrs: { "aria-hidden": "true" } }), h("p", { class: "picker-state-text", text: "Loading this thread's files…" })));
    list.appendChild(form);
    return;
  }
  if (files.error) form.appendChild(h("p", { class: "picker-state-text", text: files.error }));
  else if (!files.length) form.appendChild(h("p", { class: "picker-state-text", text: "No file is attached to this thread yet. Attach one to a message first (the paperclip), then choose it here." }));
  const selects = [];
  tool.fileFields.forEach(function (field) {
    const select = h("select", { class: "input context-input", attrs: { name: field.name, "aria-label": field.title || field.name, required: field.required ? true : null } });
    select.appendChild(h("option", { text: field.required ? "Choose a file…" : "No file", attrs: { value: "" } }));
    (Array.isArray(files) ? files : []).forEach(function (file) {
      select.appendChild(h("option", { text: fileLabel(file), attrs: { value: String(file.id) } }));
    });
    const how = field.shapes.indexOf("resource_link") >= 0 || field.shapes.indexOf("uri") >= 0 ? "sent as a short-lived link" : "embedded in the call (up to " + formatBytes(field.embeddedMaxBytes) + ")";
    form.appendChild(h("label", { class: "context-field" }, h("span", { class: "context-label", text: (field.title || field.name) + (field.required ? " *" : "") }), select, h("span", { class: "muted tool-file-hint", text: "A file of this thread, " + how + "." })));
    selects.push({ field: field, select: select });
  });
  form.appendChild(h("div", { class: "context-form-actions" }, h("button", { class: "btn btn-primary btn-sm", text: "Insert /call", attrs: { type: "submit" } })));
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    const chosen = {};
    selects.forEach(function (it) {
      if (it.select.value) chosen[it.field.name] = { $file: Number(it.select.value) };
    });
    fileForm = null;
    writeCall(tool, chosen);
  });
  form.addEventListener("keydown", function (event) {
    if (event.key === "Escape") {
      event.preventDefault();
      closePicker(true);
    }
  });
  list.appendChild(form);
  if (selects.length) selects[0].select.focus();
}

function loadFiles(tool) {
  send({ type: "tools.files" }).then(
    function (reply) {
      tool._files = reply.ok ? (reply.result && reply.result.files) || [] : { error: (reply.error && reply.error.message) || "The thread's files could not be listed." };
      if (fileForm === tool && pickerOpen()) renderPicker();
    },
    function (err) {
      tool._files = { error: err.message };
      if (fileForm === tool && pickerOpen()) renderPicker();
    }
  );
}

function chooseTool(tool) {
  if (Array.isArray(tool.fileFields) && tool.fileFields.length) {
    fileForm = tool;
    tool._files = null; // the thread's files now, not when the list was loaded
    loadFiles(tool);
    renderPicker();
    return;
  }
  writeCall(tool, {});
}

function writeCall(tool, files) {
  let args = skeleton(tool.inputSchema || { type: "object" });
  if (!args || typeof args !== "object" || Array.isArray(args)) args = {};
  (tool.fileFields || []).forEach(function (field) {
    if (files[field.name]) args[field.name] = files[field.name];
    else delete args[field.name]; // an empty skeleton is no file
  });
  const text = "/call " + ((tool.server && tool.server.slug) || "") + "." + tool.name + " " + JSON.stringify(args);
  els.input.value = text;
  closePicker(true);
  hooks.edited();
  // Put the caret in the first empty string value, else at the end.
  const start = text.indexOf("{");
  const hole = text.indexOf('""', start);
  const caret = hole >= 0 ? hole + 1 : text.length;
  els.input.setSelectionRange(caret, caret);
}

export function bindToolPicker(composerHooks) {
  hooks = composerHooks;
  if (els.toolBtn) {
    els.toolBtn.addEventListener("click", function () {
      if (pickerOpen()) closePicker(true);
      else openPicker();
    });
  }
  els.pickerSearch.addEventListener("input", function () {
    fileForm = null;
    pickerActive = 0;
    renderPicker();
  });
  els.pickerSearch.addEventListener("keydown", function (event) {
    if (fileForm) {
      if (event.key === "Escape") {
        event.preventDefault();
        closePicker(true);
      }
      return;
    }
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      const n = pickerItems.length;
      if (!n) return;
      pickerActive = (pickerActive + (event.key === "ArrowDown" ? 1 : n - 1)) % n;
      syncPickerActive();
    } else if (event.key === "Enter") {
      event.preventDefault();
      if (pickerItems[pickerActive]) chooseTool(pickerItems[pickerActive].tool);
    } else if (event.key === "Escape") {
      event.preventDefault();
      closePicker(true);
    }
  });
  document.addEventListener("mousedown", function (event) {
    if (pickerOpen() && !els.picker.contains(event.target) && !(els.toolBtn && els.toolBtn.contains(event.target))) closePicker(false);
  });
}
