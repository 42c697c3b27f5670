"""Atrium's own knobs: profile, model provider defaults, limits and timeouts."""

import json

from .database import DATABASE_URL
from .env import env_int, env_list, env_str

# "production" expects PostgreSQL, Redis and a real broker; deploy checks enforce it.
ATRIUM_PROFILE = env_str("ATRIUM_PROFILE", "production" if DATABASE_URL else "embedded")
# How many ASGI processes serve this deployment (the in-memory layer only works with one).
ATRIUM_ASGI_PROCESSES = env_int("ATRIUM_ASGI_PROCESSES", 1)

# Model provider defaults; a workspace may override them in the admin.
ATRIUM_PROVIDER = env_str("ATRIUM_PROVIDER", "direct")  # direct | openai | anthropic
ATRIUM_MODEL = env_str("ATRIUM_MODEL", "")
ATRIUM_PROVIDER_BASE_URL = env_str("ATRIUM_PROVIDER_BASE_URL", "")
ATRIUM_PROVIDER_API_KEY = env_str("ATRIUM_PROVIDER_API_KEY", "")
ATRIUM_AGENT_MAX_STEPS = env_int("ATRIUM_AGENT_MAX_STEPS", 8)

# Media: payloads above this many decoded bytes are staged and persisted by a worker.
ATRIUM_MEDIA_INLINE_LIMIT = env_int("ATRIUM_MEDIA_INLINE_LIMIT", 64 * 1024)
ATRIUM_MEDIA_MAX_BYTES = env_int("ATRIUM_MEDIA_MAX_BYTES", 200 * 1024 * 1024)
# Decoded media bytes one tool result may stage, and one server may stage in any 24 hours
# (counted in the database: every process shares it). Past them: an error part instead.
ATRIUM_MEDIA_MAX_STAGED_PER_RESULT = env_int("ATRIUM_MEDIA_MAX_STAGED_PER_RESULT", 512 * 1024**2)
ATRIUM_MEDIA_MAX_STAGED_PER_SERVER_DAY = env_int(
    "ATRIUM_MEDIA_MAX_STAGED_PER_SERVER_DAY", 20 * 1024**3
)
# A tool result's structuredContent and _meta, in serialized JSON bytes. Past them the
# value is dropped with an error part; text and other parts are kept.
ATRIUM_RESULT_MAX_STRUCTURED_BYTES = env_int("ATRIUM_RESULT_MAX_STRUCTURED_BYTES", 1024 * 1024)
ATRIUM_RESULT_MAX_META_BYTES = env_int("ATRIUM_RESULT_MAX_META_BYTES", 256 * 1024)
# Behind nginx: the URL prefix of an `internal` location that serves MEDIA_ROOT. Media views
# then check access and answer with X-Accel-Redirect, and nginx sends the file (no web
# process is busy for the length of a download). Empty: the web server streams it.
ATRIUM_MEDIA_ACCEL_REDIRECT = env_str("ATRIUM_MEDIA_ACCEL_REDIRECT", "")

# Files members attach (docs/files.md): defaults for a workspace without its own settings
# row (chat.media.models.WorkspaceFileSettings); the text a model reads of one file.
ATRIUM_ATTACH_MAX_FILE_BYTES = env_int("ATRIUM_ATTACH_MAX_FILE_BYTES", 200 * 1024 * 1024)
ATRIUM_ATTACH_MAX_TOTAL_BYTES = env_int("ATRIUM_ATTACH_MAX_TOTAL_BYTES", 10 * 1024**3)
ATRIUM_ATTACH_RETENTION_DAYS = env_int("ATRIUM_ATTACH_RETENTION_DAYS", 0)
ATRIUM_ATTACH_TEXT_BUDGET = env_int("ATRIUM_ATTACH_TEXT_BUDGET", 20_000)
# bench/: a sink endpoint that reads and discards a request body (the upload benchmark's floor).
ATRIUM_BENCH_ENDPOINTS = env_str("ATRIUM_BENCH_ENDPOINTS", "") == "1"

# Views: how long a view's capability token lives (seconds).
ATRIUM_VIEW_TOKEN_MAX_AGE = env_int("ATRIUM_VIEW_TOKEN_MAX_AGE", 12 * 3600)
ATRIUM_TOOL_CALL_TIMEOUT = env_int("ATRIUM_TOOL_CALL_TIMEOUT", 60)
ATRIUM_APPROVAL_TTL = env_int("ATRIUM_APPROVAL_TTL", 24 * 3600)
# Approvals pending at once: per member's copy of an app view, and per thread (docs/consent.md).
ATRIUM_APPROVALS_PENDING_PER_VIEW = env_int("ATRIUM_APPROVALS_PENDING_PER_VIEW", 3)
ATRIUM_APPROVALS_PENDING_PER_THREAD = env_int("ATRIUM_APPROVALS_PENDING_PER_THREAD", 20)
# Largest websocket frame a client may send (bytes).
ATRIUM_MAX_WS_MESSAGE = env_int("ATRIUM_MAX_WS_MESSAGE", 1024 * 1024)

# Rate limits (bindings.ratelimit): kind -> (burst, tokens per second). Buckets are per user
# ("user_*", "tool_call" — which also bounds the approval requests and waits a person
# can cause —, "message") or per view ("view_*"); shared
# across processes through Redis in production. ATRIUM_RATE_LIMITS (JSON, same shape)
# overrides single kinds, e.g. for a load test. The view bridge's own buckets
# (view_request, user_view_request, view_model_context, view_widget_state) have their
# defaults in its table, chat/actions/view_methods.py; they are overridden the same way.
ATRIUM_RATE_LIMITS = {
    "tool_call": (30, 5.0),  # tool calls a person starts (/call, views, the tool picker)
    "message": (20, 1.0),  # chat messages one person posts
    "tools_list": (10, 0.5),  # tool pickers opened (each may refresh catalogues)
    "approval_decide": (20, 2.0),  # approval decisions one person sends
    "oauth_connect": (5, 0.05),  # OAuth sign-ins one person starts (discovery, registration)
    # Audit rows of refusals (bindings.ratelimit.audit_gate), per person or, before
    # sign-in, per client address; the next row written carries how many were skipped.
    "refusal_audit": (20, 0.1),
    "rate_limited_audit": (1, 0.1),  # RATE_LIMITED rows: one per flooded bucket per 10 s
    "replay": (20, 0.5),  # `replay` frames one person sends (each reads up to 2000 events)
}
ATRIUM_RATE_LIMITS.update(
    {k: tuple(v) for k, v in json.loads(env_str("ATRIUM_RATE_LIMITS", "{}")).items()}
)

# OAuth sign-in (mcp_bridge.oauth, mcp_bridge.egress): the discovery, registration and
# token URLs a server names must resolve to public addresses, except on the MCP server's
# own origin and on the origins named here (scheme://host[:port], e.g. http://10.0.0.5:9000).
ATRIUM_OAUTH_ALLOWED_PRIVATE_ORIGINS = env_list("ATRIUM_OAUTH_ALLOWED_PRIVATE_ORIGINS", [])
# Atrium's OAuth client ID metadata document URL (its client id where authorization servers
# support them); empty: ATRIUM_APP_ORIGIN + /oauth/client-metadata.json when that is https.
ATRIUM_OAUTH_CLIENT_METADATA_URL = env_str("ATRIUM_OAUTH_CLIENT_METADATA_URL", "")
