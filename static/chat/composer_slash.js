/* The composer's slash-command popup: typing "/" lists the commands; arrows, Enter or Tab
 * choose one. */
import { h } from "./dom.js";
import { canAct, els } from "./thread_state.js";

// The composer's: send the input, the input was edited, open the tool picker.
let hooks = { submit() {}, edited() {}, openPicker() {} };

const COMMANDS = [
  { name: "/help", args: "", desc: "Show what you can do here" },
  { name: "/tools", args: "", desc: "List the tools available in this thread" },
  // A file of this thread goes in as {"$file": id} (or its name): the server checks it and
  // sends it as the tool's schema takes it (a link or embedded; docs/files.md).
  { name: "/call", args: "server.tool {json}", desc: 'Run a tool with JSON arguments; {"$file": id} passes a file of this thread' },
];

let slashItems = [];
let slashActive = 0;

function slashOpen() {
  return els.slash && !els.slash.hidden;
}

export function updateSlash() {
  if (!els.slash) return;
  const m = /^(\/\S*)$/.exec(els.input.value);
  if (!m || !canAct()) {
    closeSlash();
    return;
  }
  const typed = m[1].toLowerCase();
  const matches = COMMANDS.filter(function (c) {
    return c.name.indexOf(typed) === 0;
  });
  if (!matches.length) {
    closeSlash();
    return;
  }
  const previous = slashItems[slashActive] && slashItems[slashActive].name;
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
    const item = h(
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

export function closeSlash() {
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
    hooks.submit();
    return;
  }
  els.input.value = cmd.name + " ";
  closeSlash();
  hooks.edited();
  els.input.focus();
  if (cmd.name === "/call") hooks.openPicker();
}

/** Arrow keys, Enter, Tab and Escape while the popup is open; true when it took the key. */
export function slashKeydown(event) {
  if (!slashOpen() || !slashItems.length) return false;
  if (event.key === "ArrowDown" || event.key === "ArrowUp") {
    event.preventDefault();
    const n = slashItems.length;
    slashActive = (slashActive + (event.key === "ArrowDown" ? 1 : n - 1)) % n;
    renderSlash();
    return true;
  }
  if ((event.key === "Enter" && !event.shiftKey) || event.key === "Tab") {
    event.preventDefault();
    chooseCommand(slashItems[slashActive]);
    return true;
  }
  if (event.key === "Escape") {
    event.preventDefault();
    closeSlash();
    return true;
  }
  return false;
}

export function bindSlash(composerHooks) {
  hooks = composerHooks;
  els.input.addEventListener("blur", () => setTimeout(closeSlash, 120));
}
