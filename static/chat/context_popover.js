/* The shared frame of the prompt and resource pickers: a popover above the composer with a
 * search box and a list, a composer button that opens it, and an argument form whose fields
 * ask the server for completions (`context.complete`, rate-limited on the server). */
import { h, icon } from "./dom.js";
import { send } from "./socket.js";
import { els } from "./thread_state.js";


export function makePopover(id, label, placeholder) {
  const search = h("input", { class: "tool-picker-input", attrs: { type: "search", placeholder: placeholder, "aria-label": placeholder, autocomplete: "off", spellcheck: "false" } });
  const list = h("div", { class: "tool-picker-list", attrs: { role: "listbox", "aria-label": label } });
  const root = h("div", { class: "popover tool-picker context-picker", attrs: { id: id, role: "dialog", "aria-label": label, hidden: true } }, h("div", { class: "tool-picker-search" }, search), list);
  const inner = els.composer && els.composer.closest(".composer-inner");
  if (inner) inner.insertBefore(root, inner.firstChild);
  return { root, search, list };
}

export function makeButton(id, iconName, title, controls) {
  const btn = h("button", { class: "icon-btn composer-tool-btn", attrs: { type: "button", id: id, title: title, "aria-haspopup": "dialog", "aria-expanded": "false", "aria-controls": controls } }, icon(iconName), h("span", { class: "sr-only", text: title }));
  if (els.toolBtn) els.toolBtn.after(btn);
  return btn;
}

export function stateMessage(list, title, text) {
  list.appendChild(h("div", { class: "picker-state" }, h("p", { class: "picker-state-title", text: title }), text ? h("p", { class: "picker-state-text", text: text }) : null));
}

export function loading(list, text) {
  list.appendChild(h("div", { class: "picker-state" }, h("span", { class: "spinner spinner-sm", attrs: { "aria-hidden": "true" } }), h("p", { class: "picker-state-text", text: text })));
}

export function pickerItem(iconName, title, name, desc, onChoose) {
  const item = h(
    "div",
    { class: "picker-item", attrs: { role: "option" } },
    h("span", { class: "picker-item-icon" }, icon(iconName)),
    h("span", { class: "picker-item-text" }, h("span", { class: "picker-item-title", text: title }), h("span", { class: "picker-item-name", text: name }), desc ? h("span", { class: "picker-item-desc", text: desc }) : null)
  );
  item.addEventListener("mousedown", (event) => event.preventDefault());
  item.addEventListener("click", onChoose);
  return item;
}

/**
 * An argument form: fields [{name, description, required}], each asking the server for
 * completions as the member types. ref: the completion/complete reference. onSubmit(values).
 */
export function argumentForm(server, ref, title, subtitle, fields, submitLabel, onSubmit, onBack) {
  const inputs = {};
  let timer = 0;
  const form = h("form", { class: "context-form", attrs: { autocomplete: "off" } });
  form.appendChild(h("div", { class: "context-form-head" }, h("button", { class: "btn btn-ghost btn-xs", text: "‹ Back", attrs: { type: "button" }, on: { click: onBack } }), h("span", { class: "context-form-title", text: title }), h("span", { class: "picker-item-name", text: subtitle })));
  fields.forEach(function (field) {
    const input = h("input", { class: "input context-input", attrs: { name: field.name, required: field.required ? true : null, "aria-label": field.name, placeholder: field.description || "" } });
    const hints = h("div", { class: "context-hints", attrs: { "aria-live": "polite" } });
    inputs[field.name] = input;
    const ask = function () {
      clearTimeout(timer);
      timer = setTimeout(function () {
        const context = {};
        Object.keys(inputs).forEach(function (k) {
          if (k !== field.name && inputs[k].value) context[k] = inputs[k].value;
        });
        send({ type: "context.complete", server: server, ref: ref, argument: { name: field.name, value: input.value }, context: context }).then(function (reply) {
          hints.textContent = "";
          const values = (reply.ok && reply.result && reply.result.values) || [];
          values.slice(0, 8).forEach(function (value) {
            hints.appendChild(h("button", { class: "chip context-hint", text: value, attrs: { type: "button" }, on: { mousedown: (e) => e.preventDefault(), click: function () { input.value = value; hints.textContent = ""; } } }));
          });
        });
      }, 180);
    };
    input.addEventListener("focus", ask);
    input.addEventListener("input", ask);
    form.appendChild(h("label", { class: "context-field" }, h("span", { class: "context-label", text: field.name + (field.required ? " *" : "") }), input, hints));
  });
  form.appendChild(h("div", { class: "context-form-actions" }, h("button", { class: "btn btn-primary btn-sm", text: submitLabel, attrs: { type: "submit" } })));
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    const values = {};
    Object.keys(inputs).forEach(function (k) {
      if (inputs[k].value) values[k] = inputs[k].value;
    });
    onSubmit(values);
  });
  return { form, first: fields.length ? inputs[fields[0].name] : null };
}
