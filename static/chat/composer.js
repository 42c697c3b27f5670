/* The composer: Enter sends, Shift+Enter newline, the slash-command popup, the tool picker. */
import { h, icon } from "./dom.js";
import { send } from "./socket.js";
import { scrollToBottom } from "./timeline.js";
import { toast } from "./toasts.js";
import { canAct, els } from "./thread_state.js";

export function setComposerEnabled(enabled, placeholder) {
  if (!els.input) return;
  els.input.disabled = !enabled;
  if (placeholder) els.input.placeholder = placeholder;
  if (els.sendBtn) els.sendBtn.disabled = !enabled || !els.input.value.trim();
  if (els.toolBtn) els.toolBtn.disabled = !enabled;
  els.composer.classList.toggle("is-readonly", !enabled);
  if (!enabled) {
    closeSlash();
    closePicker(false);
  }
}

var MAX_INPUT_HEIGHT = 240;

function autogrow() {
  var input = els.input;
  input.style.height = "auto";
  var height = Math.min(input.scrollHeight, MAX_INPUT_HEIGHT);
  input.style.height = height + "px";
  input.style.overflowY = input.scrollHeight > MAX_INPUT_HEIGHT ? "auto" : "hidden";
}

function updateSendState() {
  if (els.sendBtn) els.sendBtn.disabled = els.input.disabled || !els.input.value.trim();
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
  var text = els.input.value.trim();
  if (!text) return;
  els.input.value = "";
  autogrow();
  updateSendState();
  closeSlash();
  scrollToBottom();
  send({ type: "message.post", text: text }).then(
    function (reply) {
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

var COMMANDS = [
  { name: "/help", args: "", desc: "Show what you can do here" },
  { name: "/tools", args: "", desc: "List the tools available in this thread" },
  { name: "/call", args: "server.tool {json}", desc: "Run a tool with JSON arguments" },
];

var slashItems = [];
var slashActive = 0;

function slashOpen() {
  return els.slash && !els.slash.hidden;
}

function updateSlash() {
  if (!els.slash) return;
  var m = /^(\/\S*)$/.exec(els.input.value);
  if (!m || !canAct()) {
    closeSlash();
    return;
  }
  var typed = m[1].toLowerCase();
  var matches = COMMANDS.filter(function (c) {
    return c.name.indexOf(typed) === 0;
  });
  if (!matches.length) {
    closeSlash();
    return;
  }
  var previous = slashItems[slashActive] && slashItems[slashActive].name;
  slashItems = matches;
  slashActive = Math.max(0, matches.findIndex(function (c) {
    return c.name === previous;
  }));
  renderSlash();
  els.slash.hidden = false;
  els.input.setAttribute("aria-expanded", "true");
}

function renderSlash() {
  els.slashList.textContent = "";
  slashItems.forEach(function (cmd, i) {
    var item = h(
      "div",
      { class: "slash-item" + (i === slashActive ? " is-active" : ""), attrs: { role: "option", id: "slash-opt-" + i, "aria-selected": String(i === slashActive) } },
      h("span", { class: "slash-name", text: cmd.name }),
      cmd.args ? h("span", { class: "slash-args", text: cmd.args }) : null,
      h("span", { class: "slash-desc", text: cmd.desc })
    );
    item.addEventListener("mousedown", function (event) {
      event.preventDefault();
    });
    item.addEventListener("click", function () {
      chooseCommand(cmd);
    });
    els.slashList.appendChild(item);
  });
  els.input.setAttribute("aria-activedescendant", "slash-opt-" + slashActive);
}

function closeSlash() {
  if (!els.slash) return;
  els.slash.hidden = true;
  slashItems = [];
  els.input.setAttribute("aria-expanded", "false");
  els.input.removeAttribute("aria-activedescendant");
}

function chooseCommand(cmd) {
  if (!cmd.args) {
    els.input.value = cmd.name;
    closeSlash();
    submit();
    return;
  }
  els.input.value = cmd.name + " ";
  closeSlash();
  autogrow();
  updateSendState();
  els.input.focus();
  if (cmd.name === "/call") openPicker();
}

var tools = null;
var toolsLoadedAt = 0;
var toolsState = "idle"; // idle | loading | ready | unavailable | error
var toolsError = "";
var pickerItems = [];
var pickerActive = 0;

function pickerOpen() {
  return els.picker && !els.picker.hidden;
}

function openPicker() {
  if (!els.picker || !canAct()) return;
  closeSlash();
  els.picker.hidden = false;
  if (els.toolBtn) els.toolBtn.setAttribute("aria-expanded", "true");
  els.pickerSearch.value = "";
  pickerActive = 0;
  loadTools();
  renderPicker();
  els.pickerSearch.focus();
}

function closePicker(focusInput) {
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

function renderPicker() {
  var list = els.pickerList;
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
  var q = els.pickerSearch.value.trim().toLowerCase();
  var matches = (tools || []).filter(function (t) {
    if (!q) return true;
    var hay = [t.name, t.title, t.description, t.server && t.server.name, t.server && t.server.slug].join(" ").toLowerCase();
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
  var lastServer = null;
  matches.forEach(function (tool, i) {
    var serverName = (tool.server && (tool.server.name || tool.server.slug)) || "";
    if (serverName !== lastServer) {
      list.appendChild(h("div", { class: "picker-group", text: serverName, attrs: { role: "presentation" } }));
      lastServer = serverName;
    }
    var badges = h("span", { class: "picker-badges" });
    if (tool.hasUi) badges.appendChild(h("span", { class: "tag tag-accent", text: "App" }));
    if (tool.risk && tool.risk !== "read") badges.appendChild(h("span", { class: "risk-badge risk-" + tool.risk, text: tool.risk === "destructive" ? "Destructive" : "Write" }));
    var item = h(
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
  var active = pickerItems[pickerActive];
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
  var type = Array.isArray(schema.type)
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
      var out = {};
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

function chooseTool(tool) {
  var args = skeleton(tool.inputSchema || { type: "object" });
  if (!args || typeof args !== "object" || Array.isArray(args)) args = {};
  var text = "/call " + ((tool.server && tool.server.slug) || "") + "." + tool.name + " " + JSON.stringify(args);
  els.input.value = text;
  closePicker(true);
  autogrow();
  updateSendState();
  // Put the caret in the first empty string value, else at the end.
  var start = text.indexOf("{");
  var hole = text.indexOf('""', start);
  var caret = hole >= 0 ? hole + 1 : text.length;
  els.input.setSelectionRange(caret, caret);
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
  els.input.addEventListener("keydown", function (event) {
    if (event.isComposing || event.keyCode === 229) return;
    if (slashOpen() && slashItems.length) {
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        var n = slashItems.length;
        slashActive = (slashActive + (event.key === "ArrowDown" ? 1 : n - 1)) % n;
        renderSlash();
        return;
      }
      if ((event.key === "Enter" && !event.shiftKey) || event.key === "Tab") {
        event.preventDefault();
        chooseCommand(slashItems[slashActive]);
        return;
      }
      if (event.key === "Escape") {
        event.preventDefault();
        closeSlash();
        return;
      }
    }
    if (event.key === "Enter" && !event.shiftKey && !event.altKey && !event.ctrlKey && !event.metaKey) {
      event.preventDefault();
      submit();
    }
  });
  els.input.addEventListener("blur", function () {
    setTimeout(closeSlash, 120);
  });

  if (els.toolBtn) {
    els.toolBtn.addEventListener("click", function () {
      if (pickerOpen()) closePicker(true);
      else openPicker();
    });
  }
  els.pickerSearch.addEventListener("input", function () {
    pickerActive = 0;
    renderPicker();
  });
  els.pickerSearch.addEventListener("keydown", function (event) {
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      var n = pickerItems.length;
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
  autogrow();
  updateSendState();
}
