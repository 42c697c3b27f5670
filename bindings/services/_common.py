"""Audit fields shared by the bindings services (who acted; which binding, workspace, server)."""

from __future__ import annotations

from typing import Any

from bindings.models import AppBinding


def actor_fields(actor: Any, actor_label: str) -> dict[str, Any]:
    return {
        "actor_kind": "user" if actor is not None else "system",
        "actor_user_id": getattr(actor, "pk", None),
        "actor_label": actor_label,
    }


def binding_fields(binding: AppBinding) -> dict[str, Any]:
    """An audit row's binding, its workspace and its server (the thread is the caller's)."""
    return {
        "workspace_id": binding.workspace_id,
        "binding_id": binding.pk,
        "server_id": binding.server_id,
    }
