"""What goes with a workspace or a thread that chat deletes: its bindings and their rows."""

from __future__ import annotations

from django.db import transaction

from bindings.models import Allowance, AppBinding, ApprovalRequest


def workspace_bindings_delete(*, workspace_id: int) -> None:
    """A workspace is being deleted (chat calls this in the deleting transaction): its
    bindings go, and with them their policies, approvals and allowances. Not audited: the
    workspace's deletion is the change; its audit history stays."""
    with transaction.atomic():
        Allowance.objects.filter(workspace_id=workspace_id).delete()
        AppBinding.objects.filter(workspace_id=workspace_id).delete()


def thread_bindings_delete(*, thread_id: int) -> None:
    """A thread is being deleted (chat calls this in the deleting transaction): its own
    bindings, its approvals and its allowances go (the workspace's bindings stay)."""
    with transaction.atomic():
        Allowance.objects.filter(thread_id=thread_id).delete()
        ApprovalRequest.objects.filter(thread_id=thread_id).delete()
        AppBinding.objects.filter(thread_id=thread_id).delete()
