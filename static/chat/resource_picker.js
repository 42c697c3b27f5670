/* The resource picker: resources and templates of the servers bound to this thread (app
 * views' ui:// resources are never listed). A chosen resource waits as a chip above the
 * input; the next message carries it (`message.post_resources`). Templates ask for their
 * variables, with the server's completions. */
import { argumentForm, loading, makeButton, makePopover, pickerItem, stateMessage } from "./context_popover.js";
import { h, icon } from "./dom.js";
import { send } from "./socket.js";
import { canAct, els } from "./thread_state.js";
import { toast } from "./toasts.js";

const MAX = 5;
let ui = null;
let entries = null;
let problems = [];
let pending = [];
let hooks = { edited() {} };

export function pendingResources() {
  return pending.map((r) => ({ server: r.server, uri: r.uri }));
}

export function clearPending() {
  pending = [];
  renderChips();
}

function open() {
  if (!canAct()) return;
  ui.root.hidden = false;
  ui.btn.setAttribute("aria-expanded", "true");
  ui.search.value = "";
  ui.search.parentElement.hidden = false;
  load();
  ui.search.focus();
}

export function closeResourcePicker() {
  if (!ui || ui.root.hidden) return;
  ui.root.hidden = true;
  ui.btn.setAttribute("aria-expanded", "false");
}

function load() {
  entries = null;
  render();
  send({ type: "resources.list" }).then(function (reply) {
    entries = (reply.ok && reply.result.resources) || [];
    problems = (reply.ok && reply.result.problems) || [];
    if (!reply.ok) toast((reply.error && reply.error.message) || "The resources could not be loaded.", "error");
    render();
  });
}

function render() {
  const list = ui.list;
  list.textContent = "";
  if (entries === null) return loading(list, "Loading resources…");
  const q = ui.search.value.trim().toLowerCase();
  const shown = entries.filter(function (e) {
    return !q || (e.server + " " + (e.name || "") + " " + (e.uri || e.uriTemplate || "")).toLowerCase().indexOf(q) >= 0;
  });
  if (!shown.length) stateMessage(list, entries.length ? "No matching resource" : "No resources here", entries.length ? "" : "The servers bound to this thread offer no resources.");
  shown.forEach(function (e) {
    const template = e.kind === "templates";
    const name = e.serverName + " · " + (template ? e.uriTemplate : e.uri) + (e.mimeType ? " · " + e.mimeType : "");
    list.appendChild(pickerItem(template ? "link" : "file", e.title || e.name || e.uri, name, e.description, () => choose(e)));
  });
  problems.forEach((p) => stateMessage(list, p.server, p.message));
}

function add(entry, uri) {
  closeResourcePicker();
  if (pending.length >= MAX) return toast("Attach at most " + MAX + " resources to one message.", "error");
  pending.push({ server: entry.server, serverName: entry.serverName, uri: uri, name: entry.name || uri, mimeType: entry.mimeType || "" });
  renderChips();
  hooks.edited();
  if (els.input) els.input.focus();
}

function variables(template) {
  const names = [];
  (template.match(/\{[^}]+\}/g) || []).forEach(function (m) {
    m.slice(1, -1).replace(/^[+#./;?&]/, "").split(",").forEach(function (n) {
      n = n.replace(/\*$|:\d+$/, "");
      if (n && names.indexOf(n) < 0) names.push(n);
    });
  });
  return names;
}

function choose(e) {
  if (e.kind !== "templates") return add(e, e.uri);
  const fields = variables(e.uriTemplate).map((n) => ({ name: n, required: true, description: "" }));
  ui.list.textContent = "";
  ui.search.parentElement.hidden = true;
  const built = argumentForm(e.server, { type: "ref/resource", uri: e.uriTemplate }, e.name || e.uriTemplate, e.uriTemplate, fields, "Attach", function (values) {
    const uri = e.uriTemplate.replace(/\{[^}]+\}/g, function (m) {
      const n = m.slice(1, -1).replace(/^[+#./;?&]/, "").replace(/\*$|:\d+$/, "");
      return encodeURIComponent(values[n] || "");
    });
    add(e, uri);
  }, function () {
    ui.search.parentElement.hidden = false;
    render();
  });
  ui.list.appendChild(built.form);
  if (built.first) built.first.focus();
}

function renderChips() {
  ui.chips.textContent = "";
  ui.chips.hidden = !pending.length;
  pending.forEach(function (r, i) {
    ui.chips.appendChild(
      h("span", { class: "resource-chip", attrs: { title: r.uri } }, icon("file"), h("span", { class: "resource-chip-name", text: r.name }), h("span", { class: "resource-chip-meta", text: r.serverName + (r.mimeType ? " · " + r.mimeType : "") }), h("button", { class: "resource-chip-remove", attrs: { type: "button", "aria-label": "Remove " + r.name }, on: { click: function () { pending.splice(i, 1); renderChips(); } } }, icon("x")))
    );
  });
}

export function bindResourcePicker(composerHooks) {
  if (!els.composer || !els.toolBtn || !canAct()) return;
  hooks = composerHooks || hooks;
  const pop = makePopover("resource-picker", "Resources", "Search resources…");
  ui = { ...pop, btn: makeButton("resource-picker-btn", "file", "Attach a server resource", "resource-picker") };
  ui.chips = h("div", { class: "resource-chips", attrs: { "aria-label": "Resources attached to your next message", hidden: true } });
  els.composer.before(ui.chips);
  ui.btn.addEventListener("click", () => (ui.root.hidden ? open() : closeResourcePicker()));
  ui.search.addEventListener("input", render);
  ui.root.addEventListener("keydown", function (event) {
    if (event.key === "Escape") {
      event.preventDefault();
      closeResourcePicker();
      els.input.focus();
    }
  });
}
