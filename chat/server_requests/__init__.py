"""Requests a server sends to a person during a call: elicitation (form and URL) and the
consent card of sampling. Rows, services, the per-call handler, the answer waiters.

The package is below ``chat.calls`` (``chat/calls/run.py`` passes its handler to the
gateway) and above the thread-event bus; it imports neither calls, agent nor actions.
"""
