"""Websocket actions: one small async handler per client message type, and slash commands.

The registry (:mod:`.registry`: ``ActionContext``, ``action``, ``HANDLERS``…) is below the
handler modules, which register their handlers when this package is imported. Import names
from ``.registry``, not from this package: a handler module that imported this package would
import itself back (the cycle tests/test_import_graph.py forbids).
"""

from . import app_views, layout, messages, server_context, server_requests, tools, view_tools  # noqa: F401  (handlers)
