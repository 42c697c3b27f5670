"""MCP servers, their tool catalogue and their UI resources."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.text import slugify

from .sealed_fields import SealedJSONField


class Transport(models.TextChoices):
    STDIO = "stdio", "stdio"
    STREAMABLE_HTTP = "streamable_http", "Streamable HTTP"
    SSE = "sse", "SSE"


class AuthMode(models.TextChoices):
    NONE = "none", "None"
    HEADERS = "headers", "Static headers"
    OAUTH_SHARED = "oauth_shared", "OAuth, one shared grant"
    OAUTH_MEMBER = "oauth_member", "OAuth, each member their own"
    OAUTH_MACHINE = "oauth_machine", "OAuth client credentials (machine to machine)"


# Modes whose grants a person gets by signing in (Connect).
OAUTH_MODES = (AuthMode.OAUTH_SHARED, AuthMode.OAUTH_MEMBER)


class TokenAuthMethod(models.TextChoices):
    """How Atrium authenticates at the token endpoint with a pre-registered client."""

    AUTO = "", "Automatic (basic with a secret, none without)"
    BASIC = "client_secret_basic", "Client secret, HTTP Basic"
    POST = "client_secret_post", "Client secret in the request body"
    PRIVATE_KEY_JWT = "private_key_jwt", "Private key JWT (client credentials only)"
    NONE = "none", "None (public client)"


class McpServer(models.Model):
    name = models.CharField(max_length=100)
    slug = models.SlugField(max_length=60, unique=True)
    transport = models.CharField(max_length=20, choices=Transport.choices)
    command = models.CharField(max_length=500, blank=True)
    args = models.JSONField(default=list, blank=True)
    # env and headers may hold secrets: sealed at rest (mcp_bridge.sealing, like OAuth
    # grants), and the admin never shows their values back.
    # A value written as "${NAME}" is read from this process's environment at connect time.
    env = SealedJSONField(default=dict, blank=True)
    cwd = models.CharField(max_length=500, blank=True)
    url = models.URLField(max_length=500, blank=True)
    headers = SealedJSONField(default=dict, blank=True)
    auth_mode = models.CharField(
        max_length=20,
        choices=AuthMode.choices,
        default=AuthMode.NONE,
        help_text="OAuth modes sign in with the server's authorization server (docs/oauth.md).",
    )
    enabled = models.BooleanField(default=True)
    call_timeout = models.FloatField(default=60.0, help_text="Seconds before a tool call fails.")
    connect_timeout = models.FloatField(default=20.0)
    sandbox_subdomain = models.SlugField(
        max_length=60, blank=True, help_text="Own sandbox origin {subdomain}.<sandbox suffix>."
    )
    last_error = models.TextField(blank=True)
    last_seen = models.DateTimeField(null=True, blank=True)
    catalogue_refreshed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The lowest level of `notifications/message` the server is asked to send ("": its own
    # default); set through `server_log.server_log_level_set` (audited), docs/mcp-client.md.
    log_level = models.CharField(max_length=12, blank=True, default="")
    # Signing in (docs/mcp-client.md, "Signing in"). A client registered with the server's
    # authorization server ahead of time, entered by a superuser: {"client_id",
    # "client_secret", "private_key" (PEM), "signing_algorithm"}; sealed like env/headers and
    # never shown back. Empty: client ID metadata document, else dynamic registration.
    oauth_client = SealedJSONField(default=dict, blank=True)
    oauth_token_auth = models.CharField(
        "token endpoint authentication",
        max_length=30,
        blank=True,
        default="",
        choices=TokenAuthMethod.choices,
    )
    oauth_scope = models.CharField(
        "OAuth scope",
        max_length=500,
        blank=True,
        help_text="Scope to ask for (client credentials; empty: what the server names).",
    )
    oauth_issuer = models.URLField(
        "authorization server issuer",
        max_length=500,
        blank=True,
        help_text="For a pre-registered client: the only authorization server its "
        "credentials are sent to (client credentials).",
    )

    class Meta:
        ordering = ["name"]
        verbose_name = "MCP server"

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        if not self.slug:
            self.slug = slugify(self.name)[:60]
        super().save(*args, **kwargs)


class Tool(models.Model):
    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="tools")
    name = models.CharField(max_length=200)
    title = models.CharField(max_length=300, blank=True)
    description = models.TextField(blank=True)
    input_schema = models.JSONField(default=dict, blank=True)
    output_schema = models.JSONField(null=True, blank=True)
    annotations = models.JSONField(default=dict, blank=True)
    resource_uri = models.CharField(max_length=500, blank=True)
    visibility = models.JSONField(default=list, blank=True)
    is_app_sdk = models.BooleanField(default=False)
    meta = models.JSONField(default=dict, blank=True)
    problems = models.JSONField(default=list, blank=True)
    # Measured when the catalogue is read (mcp_bridge.schema.measure_input_schema): why the
    # input schema is refused (the tool cannot be called), and how many argument values
    # may be checked on the event loop (0: always in a worker process, with a deadline).
    schema_refusal = models.CharField(
        "unusable because",
        max_length=300,
        blank=True,
        help_text="Why the tool's input schema was refused when the catalogue was read; "
        "empty when the tool can be called.",
    )
    inline_check_values = models.PositiveIntegerField(
        default=0,
        help_text="Arguments of up to this many values are checked against the schema "
        "inline; larger ones, and every call of a costly schema (0), in a worker process.",
    )
    # False once the server stops listing it; kept so old tool calls still resolve.
    present = models.BooleanField(default=True)
    refreshed_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["server__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["server", "name"], name="unique_tool_per_server")
        ]

    def __str__(self) -> str:
        return f"{self.server.slug}.{self.name}"

    @property
    def visible_to_model(self) -> bool:
        return "model" in (self.visibility or [])

    @property
    def visible_to_app(self) -> bool:
        return "app" in (self.visibility or [])


class UiResource(models.Model):
    """One version of a UI resource: a changed URI or content is a new row."""

    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="ui_resources")
    uri = models.CharField(max_length=500)
    mime_type = models.CharField(max_length=200)
    flavor = models.CharField(max_length=20)
    content_hash = models.CharField(max_length=64, db_index=True)
    text = models.TextField(help_text="The HTML document, or the URL for URL flavors.")
    meta = models.JSONField(default=dict, blank=True)
    size = models.PositiveIntegerField(default=0)
    fetched_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-fetched_at"]
        verbose_name = "UI resource"
        constraints = [
            models.UniqueConstraint(
                fields=["server", "uri", "content_hash"], name="unique_ui_resource_version"
            )
        ]

    def __str__(self) -> str:
        return f"{self.uri} ({self.content_hash[:10]})"


class OAuthGrant(models.Model):
    """One authorization of Atrium at an MCP server: its client registration and tokens,
    sealed (``mcp_bridge.sealing``) and never shown back. ``user`` is None for the server's
    shared grant; otherwise the member whose account it is."""

    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="oauth_grants")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="oauth_grants",
    )
    connected_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    sealed_tokens = models.TextField()
    sealed_client = models.TextField()
    scope = models.CharField(max_length=500, blank=True)
    # A 403 insufficient_scope asked for more than the grant has: the scope the next
    # sign-in asks for (the union); the grant itself is kept meanwhile.
    wanted_scope = models.CharField(max_length=500, blank=True)
    # Where to revoke the tokens on disconnect (RFC 7009), from the server's metadata.
    revocation_endpoint = models.URLField(max_length=500, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    connected_at = models.DateTimeField(auto_now_add=True)
    refreshed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["server__name", "connected_at"]
        verbose_name = "OAuth grant"
        constraints = [
            models.UniqueConstraint(
                fields=["server", "user"],
                condition=Q(user__isnull=False),
                name="one_oauth_grant_per_member",
            ),
            models.UniqueConstraint(
                fields=["server"], condition=Q(user__isnull=True), name="one_shared_oauth_grant"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.server.slug} for {self.user or 'everyone'}"


class OAuthAuthorization(models.Model):
    """A sign-in in progress: found again by the sha256 of its ``state``, used once.

    The PKCE verifier never leaves the memory of the flow that made it (the SDK's)."""

    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    shared = models.BooleanField(default=False)
    state_digest = models.CharField(max_length=64, unique=True)
    listener = models.CharField(max_length=200, help_text="Channel of the waiting flow.")
    created_at = models.DateTimeField(auto_now_add=True)
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "OAuth sign-in in progress"

    def __str__(self) -> str:
        return f"sign-in to {self.server_id} by {self.user_id}"


LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


class ServerLogEntry(models.Model):
    """One `notifications/message` a server sent (MCP logging): a log line, not a state
    change — stored without an audit row, bounded per server (``server_log.MAX_PER_SERVER``)."""

    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="log_entries")
    level = models.CharField(max_length=12, choices=[(v, v) for v in LOG_LEVELS])
    logger = models.CharField(max_length=200, blank=True)
    data = models.JSONField(null=True, blank=True)
    received_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        verbose_name = "server log line"
        verbose_name_plural = "server log"
        indexes = [models.Index(fields=["server", "-id"], name="server_log_newest")]

    def __str__(self) -> str:
        return f"{self.server_id} {self.level}"
