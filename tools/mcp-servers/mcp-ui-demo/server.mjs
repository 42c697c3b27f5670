// MCP-UI's TypeScript server demo (MCP-UI-Org/mcp-ui, examples/typescript-server-demo at
// commit 6e8ac9c, Apache-2.0), on the pinned @mcp-ui/server 5.x — the legacy SDK (6.0 dropped
// these resource types) — for Atrium's compatibility suite (tests/compat/test_mcp_ui_servers.py).
//
// The demo's three tools (showExternalUrl, showRawHtml, showRemoteDom) are written as the demo
// writes them (createUIResource, McpServer.registerTool). Two differences, both the host's
// concern and not the app's: it speaks stdio (the operator's mcp.json way; the demo serves
// the same McpServer over express + streamable HTTP), and one more tool,
// showRemoteDomWebComponents, runs MCP-UI's remote-dom demo script (framework=webcomponents:
// a logo toggle) with a local image instead of one from the internet, plus buttons sending
// the `tool` and `notify` UI actions from remote-dom; `echo` is the tool it calls.
import { createUIResource } from "@mcp-ui/server";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const LOGO = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAEAAAABACAIAAAAlC+aJAAAA60lEQVR42u2Z0Q3DMAhEE5TJOkfVLtBxskAX6TidoxM0sjFgLB6/ke7uGSKReH/cv9vKJdviBQAAAAAAAAAAzKzDQ/T9uv179Dw/tl674TJ3kduPxAagK7otxiiAOroVhkxPP6gj09MPqkmG9COakiS9WlnypNfpS6r0CpdKu1DM8fd6lelA5PF3OfI9sARA/Py0+zJCAAAAAAAAuP41GKkWX0ZoFYD4KWp0rDRCkU1o9yr2Esc0octFXNW90ytHyI9BoSxhTk6aEuxnriZTXA11yt+RqTFy3VK2k6S+J2adBgAAAAAAAIByAD8+ulh7GV68OwAAAABJRU5ErkJggg==";

const server = new McpServer({ name: "typescript-server-demo", version: "1.0.0" });

server.registerTool(
  "showExternalUrl",
  {
    title: "Show External URL",
    description: "Creates a UI resource displaying an external URL (example.com).",
    inputSchema: {},
  },
  async () => {
    const uiResource = createUIResource({
      uri: "ui://greeting",
      content: { type: "externalUrl", iframeUrl: "https://example.com" },
      encoding: "text",
    });
    return { content: [uiResource] };
  },
);

server.registerTool(
  "showRawHtml",
  {
    title: "Show Raw HTML",
    description: "Creates a UI resource displaying raw HTML.",
    inputSchema: {},
  },
  async () => {
    const uiResource = createUIResource({
      uri: "ui://raw-html-demo",
      content: { type: "rawHtml", htmlString: "<h1>Hello from Raw HTML</h1>" },
      encoding: "text",
    });
    return { content: [uiResource] };
  },
);

server.registerTool(
  "showRemoteDom",
  {
    title: "Show Remote DOM",
    description: "Creates a UI resource displaying a remote DOM script.",
    inputSchema: {},
  },
  async () => {
    const remoteDomScript = `
        const p = document.createElement('ui-text');
        p.textContent = 'This is a remote DOM element from the server.';
        root.appendChild(p);
      `;
    const uiResource = createUIResource({
      uri: "ui://remote-dom-demo",
      content: { type: "remoteDom", script: remoteDomScript, framework: "react" },
      encoding: "text",
    });
    return { content: [uiResource] };
  },
);

const webComponentsScript = `let isDarkMode = false;

const stack = document.createElement('ui-stack');
stack.setAttribute('direction', 'vertical');
stack.setAttribute('spacing', '16');
stack.setAttribute('align', 'center');

const title = document.createElement('ui-text');
title.setAttribute('content', 'Logo Toggle Demo');

const logo = document.createElement('ui-image');
logo.setAttribute('src', ${JSON.stringify(LOGO)});
logo.setAttribute('alt', 'Logo (light)');
logo.setAttribute('width', '64');

const toggleButton = document.createElement('ui-button');
toggleButton.setAttribute('label', '🌙 Switch to Dark Mode');
toggleButton.addEventListener('press', () => {
  isDarkMode = !isDarkMode;
  logo.setAttribute('alt', isDarkMode ? 'Logo (dark)' : 'Logo (light)');
  toggleButton.setAttribute('label', isDarkMode ? '☀️ Switch to Light Mode' : '🌙 Switch to Dark Mode');
});

const name = document.createElement('ui-input');
name.setAttribute('label', 'Your name');
name.setAttribute('placeholder', 'Ada');
let typed = '';
name.addEventListener('input', (event) => { typed = String(event.detail || ''); });

const actions = document.createElement('ui-stack');
actions.setAttribute('direction', 'horizontal');
actions.setAttribute('spacing', '8');
const echo = document.createElement('ui-button');
echo.setAttribute('label', 'Echo via tool');
echo.addEventListener('press', () => {
  window.parent.postMessage({ type: 'tool', messageId: 'echo-' + Date.now(), payload: { toolName: 'echo', params: { message: 'Hello, ' + (typed || 'nobody') } } }, '*');
});
const notify = document.createElement('ui-button');
notify.setAttribute('label', 'Notify');
notify.setAttribute('variant', 'secondary');
notify.addEventListener('press', () => {
  window.parent.postMessage({ type: 'notify', payload: { message: 'Logo is ' + (isDarkMode ? 'dark' : 'light') } }, '*');
});
actions.append(echo, notify);

stack.append(title, logo, toggleButton, name, actions);
root.appendChild(stack);
`;

server.registerTool(
  "showRemoteDomWebComponents",
  {
    title: "Show Remote DOM (web components)",
    description: "MCP-UI's remote-dom demo script, framework=webcomponents.",
    inputSchema: {},
  },
  async () => {
    const uiResource = createUIResource({
      uri: "ui://remote-dom-webcomponents",
      content: { type: "remoteDom", script: webComponentsScript, framework: "webcomponents" },
      encoding: "text",
    });
    return { content: [uiResource] };
  },
);

server.registerTool(
  "echo",
  {
    title: "Echo",
    description: "Echoes a message back.",
    inputSchema: { message: z.string() },
  },
  async ({ message }) => ({ content: [{ type: "text", text: "Echo: " + message }] }),
);

await server.connect(new StdioServerTransport());
