"""Draft-spec host features of MCP Apps (issue 27, docs/view-bridge.md "Draft-spec
features"): the tools an open app view provides to the model (``tools/list`` and
``tools/call`` host→view, ``ui/list-view-tools`` / ``ui/call-view-tool`` in the v2 draft),
and sampling from a view (``sampling/createMessage``), which reuses the server requests'
consent card and sampling engine (``chat.server_requests``)."""
