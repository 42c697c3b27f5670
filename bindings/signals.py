"""Signals the authority sends so other apps can follow its changes without bindings
importing them (bindings imports nothing from chat)."""

from django.dispatch import Signal

# Sent inside the transaction that cancels pending approvals (their binding is being
# removed), with ``tool_call_ids`` (the calls that were waiting), ``code`` and ``message``.
# Receivers close those calls in the same transaction.
approvals_cancelled = Signal()

# Sent inside the transaction that creates or revokes an allowance, with ``workspace_id``
# and ``thread_id`` (``None``: a workspace allowance, every thread of it is concerned).
# Receivers tell the threads' members in the same transaction.
allowances_changed = Signal()
