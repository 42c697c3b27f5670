"""The workspaces and threads bindings are scoped to, looked up by id.

They are chat's models, one layer up: bindings never imports chat (its rows keep plain
ids, its migrations never depend on chat's). The admin and the ``mcp`` command still
offer workspaces and threads by name, so they reach them through Django's app registry,
as a string foreign key would; the hot paths carry ids and never call this.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps


def workspace_model() -> Any:
    return apps.get_model("chat", "Workspace")


def thread_model() -> Any:
    return apps.get_model("chat", "Thread")


def membership_model() -> Any:
    return apps.get_model("chat", "Membership")


def workspace_names(ids: set[int]) -> dict[int, str]:
    return dict(workspace_model().objects.filter(pk__in=ids).values_list("pk", "name"))


def thread_titles(ids: set[int]) -> dict[int, str]:
    return dict(thread_model().objects.filter(pk__in=ids).values_list("pk", "title"))
