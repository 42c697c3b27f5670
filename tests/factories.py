"""factory_boy factories for the main models.

Objects a person or an admin creates in the product (workspaces, memberships, threads,
servers, bindings, tool policies) are built through their services, so a test starts from
the same rows *and audit trail* as production. Objects the product makes as a side effect
of MCP traffic (tools, UI resources, messages, tool calls, approvals, media) are plain ORM
rows: a test hand-builds exactly the state it needs.

    user = UserFactory()                      # a person with a real (cached) password hash
    thread = ThreadFactory(workspace=ws, actor=owner)
    call = ToolCallFactory(thread=thread, server=server, tool_name="echo")
"""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

import factory
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.utils import timezone

from bindings.services.bindings import binding_create
from bindings.services.policies import tool_policy_set
from chat import services as chat_services
from chat.models import Workspace
from mcp_bridge.services.servers import server_add

PASSWORD = "pw-" + "x" * 12


@functools.cache
def password_hash(password: str, hashers: tuple[str, ...]) -> str:
    """One real hash per password for the whole run: the default hasher costs ~0.3 s a user
    on CI's machine. The hash (salt included) is as valid for every user as for the first,
    also for live servers' processes."""
    return make_password(password)


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    first_name = ""
    last_name = ""
    is_staff = False
    is_superuser = factory.SelfAttribute("is_staff")
    password = factory.LazyFunction(
        lambda: password_hash(PASSWORD, tuple(settings.PASSWORD_HASHERS))
    )

    class Params:
        staff = factory.Trait(is_staff=True)


class _ServiceFactory(factory.django.DjangoModelFactory):
    """Creates through a product service: ``_create`` calls ``service`` with the
    declarations as keyword arguments."""

    class Meta:
        abstract = True

    @classmethod
    def service(cls, **kwargs: Any) -> Any:
        raise NotImplementedError

    @classmethod
    def _create(cls, model_class: Any, *args: Any, **kwargs: Any) -> Any:
        return cls.service(**kwargs)


class WorkspaceFactory(_ServiceFactory):
    """``chat.services.workspace_create``: the owner's membership comes with it."""

    class Meta:
        model = "chat.Workspace"

    name = factory.Sequence(lambda n: f"Workspace {n}")
    owner = factory.SubFactory(UserFactory)
    slug = ""

    @classmethod
    def service(cls, **kwargs: Any) -> Any:
        return chat_services.workspace_create(**kwargs)


class MembershipFactory(_ServiceFactory):
    class Meta:
        model = "chat.Membership"

    workspace = factory.SubFactory(WorkspaceFactory)
    user = factory.SubFactory(UserFactory)
    role = "member"

    @classmethod
    def service(cls, **kwargs: Any) -> Any:
        return chat_services.membership_set(**kwargs)


class ThreadFactory(_ServiceFactory):
    """``chat.services.thread_create`` as ``actor`` (by default the workspace's owner)."""

    class Meta:
        model = "chat.Thread"

    workspace = factory.SubFactory(WorkspaceFactory)
    title = factory.Sequence(lambda n: f"Thread {n}")
    actor = factory.LazyAttribute(
        lambda o: o.workspace.memberships.filter(role="owner").first().user
    )

    @classmethod
    def service(cls, **kwargs: Any) -> Any:
        return chat_services.thread_create(**kwargs)


class McpServerFactory(_ServiceFactory):
    """``mcp_bridge.services.servers.server_add``; by default a stdio server that is never started."""

    class Meta:
        model = "mcp_bridge.McpServer"

    name = factory.Sequence(lambda n: f"Server {n}")
    slug = factory.Sequence(lambda n: f"server{n}")
    transport = "stdio"
    command = "true"

    @classmethod
    def service(cls, **kwargs: Any) -> Any:
        return server_add(**kwargs)


class AppBindingFactory(_ServiceFactory):
    class Meta:
        model = "bindings.AppBinding"

    server = factory.SubFactory(McpServerFactory)
    workspace = factory.SubFactory(WorkspaceFactory)

    @classmethod
    def service(cls, **kwargs: Any) -> Any:
        return binding_create(**kwargs)


class ToolPolicyFactory(_ServiceFactory):
    class Meta:
        model = "bindings.ToolPolicy"

    binding = factory.SubFactory(AppBindingFactory)
    tool_name = "echo"
    approval = "auto"

    @classmethod
    def service(cls, **kwargs: Any) -> Any:
        return tool_policy_set(**kwargs)


# ---- rows the product makes from MCP traffic: plain ORM -----------------------------------------


class ToolFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "mcp_bridge.Tool"

    server = factory.SubFactory(McpServerFactory)
    name = factory.Sequence(lambda n: f"tool{n}")
    input_schema = factory.LazyFunction(lambda: {"type": "object"})
    visibility = factory.LazyFunction(lambda: ["model", "app"])


class UiResourceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "mcp_bridge.UiResource"

    server = factory.SubFactory(McpServerFactory)
    uri = factory.Sequence(lambda n: f"ui://test/view{n}.html")
    mime_type = "text/html;profile=mcp-app"
    flavor = "mcp-app"
    text = "<!doctype html><p>view</p>"
    content_hash = factory.Sequence(lambda n: f"{n:064x}")
    size = factory.LazyAttribute(lambda o: len(o.text.encode()))


class MessageFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "chat.Message"

    thread = factory.SubFactory(ThreadFactory)
    role = "user"
    author = None
    text = factory.Sequence(lambda n: f"message {n}")


class ToolCallFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "chat.ToolCall"

    thread = factory.SubFactory(ThreadFactory)
    server = factory.SubFactory(McpServerFactory)
    tool_name = "echo"
    origin = "user"
    status = "success"


class ApprovalRequestFactory(factory.django.DjangoModelFactory):
    """Bindings keep the thread's and the call's ids (bindings never import chat): pass
    ``thread`` and ``tool_call`` objects, the factory stores their ids."""

    class Meta:
        model = "bindings.ApprovalRequest"
        exclude = ("thread", "tool_call")

    binding = factory.SubFactory(AppBindingFactory)
    thread = factory.LazyAttribute(
        lambda o: ThreadFactory(workspace=Workspace.objects.get(pk=o.binding.workspace_id))
    )
    tool_call = None
    thread_id = factory.LazyAttribute(lambda o: o.thread.pk)
    tool_call_id = factory.LazyAttribute(lambda o: o.tool_call.pk if o.tool_call else None)
    server = factory.SelfAttribute("binding.server")
    tool_name = "echo"
    arguments = factory.LazyFunction(dict)
    arguments_digest = "0" * 64
    risk = "write"
    requested_by_kind = "user"
    expires_at = factory.LazyFunction(lambda: timezone.now() + timedelta(minutes=10))


class MediaAssetFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "chat.MediaAsset"

    thread = factory.SubFactory(ThreadFactory)
    kind = "image"
    mime_type = "image/png"
    filename = factory.Sequence(lambda n: f"image{n}.png")
