// Legacy MCP-UI remote-DOM script (framework=react). A host with remote-DOM support runs it in
// a sandboxed worker, where `root` is the remote root element and the `ui-*` elements map to
// the host's own components. Actions go to the host with the same postMessage protocol as
// raw HTML views.
const renderData = (typeof initialRenderData === "object" && initialRenderData) || {};
let count = Number.isFinite(renderData.start) ? renderData.start : 0;
const label = typeof renderData.label === "string" ? renderData.label : "Clicks";

const stack = document.createElement("ui-stack");
stack.setAttribute("direction", "vertical");
stack.setAttribute("spacing", "12");

const title = document.createElement("ui-text");
title.setAttribute("content", "Remote DOM counter");

const value = document.createElement("ui-text");
value.setAttribute("content", `${label}: ${count}`);

const row = document.createElement("ui-stack");
row.setAttribute("direction", "horizontal");
row.setAttribute("spacing", "8");

const increment = document.createElement("ui-button");
increment.setAttribute("label", "Add one");
increment.addEventListener("press", () => {
  count += 1;
  value.setAttribute("content", `${label}: ${count}`);
});

const report = document.createElement("ui-button");
report.setAttribute("label", "Echo via tool");
report.addEventListener("press", () => {
  window.parent.postMessage(
    {
      type: "tool",
      messageId: `remote-dom-${Date.now()}`,
      payload: { toolName: "legacy_echo", params: { message: `${label}: ${count}`, data: { count } } },
    },
    "*",
  );
});

row.append(increment, report);
stack.append(title, value, row);
root.appendChild(stack);
