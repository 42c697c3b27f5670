/* The prompt picker: the prompts of the servers bound to this thread; choosing one asks for
 * its arguments (with the server's completions) and posts its messages (`prompt.use`). The
 * text form is `/prompt server.prompt key=value …`. */
import { argumentForm, loading, makeButton, makePopover, pickerItem, stateMessage } from "./context_popover.js";
import { send } from "./socket.js";
import { canAct, els } from "./thread_state.js";
import { toast } from "./toasts.js";

let ui = null;
let prompts = null;
let problems = [];

function open() {
  if (!canAct()) return;
  ui.root.hidden = false;
  ui.btn.setAttribute("aria-expanded", "true");
  ui.search.value = "";
  ui.search.parentElement.hidden = false;
  load();
  ui.search.focus();
}

export function closePromptPicker() {
  if (!ui || ui.root.hidden) return;
  ui.root.hidden = true;
  ui.btn.setAttribute("aria-expanded", "false");
}

function load() {
  prompts = null;
  render();
  send({ type: "prompts.list" }).then(function (reply) {
    prompts = (reply.ok && reply.result.prompts) || [];
    problems = (reply.ok && reply.result.problems) || [];
    if (!reply.ok) toast((reply.error && reply.error.message) || "The prompts could not be loaded.", "error");
    render();
  });
}

function render() {
  const list = ui.list;
  list.textContent = "";
  if (prompts === null) return loading(list, "Loading prompts…");
  const q = ui.search.value.trim().toLowerCase();
  const shown = prompts.filter(function (p) {
    return !q || (p.server + "." + p.name + " " + (p.title || "") + " " + (p.description || "")).toLowerCase().indexOf(q) >= 0;
  });
  if (!shown.length) stateMessage(list, prompts.length ? "No matching prompt" : "No prompts here", prompts.length ? "" : "The servers bound to this thread offer no prompts.");
  shown.forEach(function (p) {
    list.appendChild(pickerItem("code", p.title || p.name, p.serverName + " · " + p.server + "." + p.name, p.description, () => choose(p)));
  });
  problems.forEach(function (p) {
    stateMessage(list, p.server, p.message);
  });
}

function use(p, args) {
  closePromptPicker();
  send({ type: "prompt.use", server: p.server, name: p.name, arguments: args }).then(function (reply) {
    if (!reply.ok) toast((reply.error && reply.error.message) || "The prompt was not posted.", "error");
  });
  if (els.input) els.input.focus();
}

function choose(p) {
  const fields = (p.arguments || []).filter((a) => a && a.name);
  if (!fields.length) return use(p, {});
  ui.list.textContent = "";
  ui.search.parentElement.hidden = true;
  const built = argumentForm(p.server, { type: "ref/prompt", name: p.name }, p.title || p.name, p.server + "." + p.name, fields, "Post prompt", (values) => use(p, values), function () {
    ui.search.parentElement.hidden = false;
    render();
  });
  ui.list.appendChild(built.form);
  if (built.first) built.first.focus();
}

export function bindPromptPicker() {
  if (!els.composer || !els.toolBtn || !canAct()) return;
  const pop = makePopover("prompt-picker", "Prompts", "Search prompts…");
  ui = { ...pop, btn: makeButton("prompt-picker-btn", "code", "Use a server's prompt", "prompt-picker") };
  ui.btn.addEventListener("click", () => (ui.root.hidden ? open() : closePromptPicker()));
  ui.search.addEventListener("input", render);
  ui.root.addEventListener("keydown", function (event) {
    if (event.key === "Escape") {
      event.preventDefault();
      closePromptPicker();
      els.input.focus();
    }
  });
}
