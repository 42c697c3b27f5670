"""Signals from the MCP layer to the apps above it (which ``mcp_bridge`` must not import).

``server_notified`` — a server sent a notification other than ``tools/list_changed``
(logging, resource and prompt list changes, resource updates, elicitation completion).
Sent from the event loop with ``asend``: receivers are async (or wrapped by Django), take
``server`` (``McpServer``), ``spec_key``, ``method`` and ``params`` (wire JSON), and must be
quick: they run on the connection's callback task.
"""

from django.dispatch import Signal

server_notified = Signal()
