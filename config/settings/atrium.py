"""Atrium's own knobs: profile, model provider defaults, limits and timeouts."""

import json

from .database import DATABASE_URL
from .env import env_int, env_str

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
# Behind nginx: the URL prefix of an `internal` location that serves MEDIA_ROOT. Media views
# then check access and answer with X-Accel-Redirect, and nginx sends the file (no web
# process is busy for the length of a download). Empty: the web server streams it.
ATRIUM_MEDIA_ACCEL_REDIRECT = env_str("ATRIUM_MEDIA_ACCEL_REDIRECT", "")

# Views: how long a view's capability token lives (seconds).
ATRIUM_VIEW_TOKEN_MAX_AGE = env_int("ATRIUM_VIEW_TOKEN_MAX_AGE", 12 * 3600)
ATRIUM_TOOL_CALL_TIMEOUT = env_int("ATRIUM_TOOL_CALL_TIMEOUT", 60)
ATRIUM_APPROVAL_TTL = env_int("ATRIUM_APPROVAL_TTL", 24 * 3600)
# Largest websocket frame a client may send (bytes).
ATRIUM_MAX_WS_MESSAGE = env_int("ATRIUM_MAX_WS_MESSAGE", 1024 * 1024)

# Rate limits (bindings.ratelimit): kind -> (burst, tokens per second). Buckets are per user
# ("user_*", "tool_call" — which also bounds the approval requests and waits a person
# can cause —, "message") or per view ("view_*"); shared
# across processes through Redis in production. ATRIUM_RATE_LIMITS (JSON, same shape)
# overrides single kinds, e.g. for a load test.
ATRIUM_RATE_LIMITS = {
    "view_request": (60, 20.0),  # any request of one view
    "user_view_request": (120, 40.0),  # any view request of one person, all views together
    "tool_call": (30, 5.0),  # tool calls a person starts (/call, views, the tool picker)
    "view_widget_state": (20, 2.0),
    "view_model_context": (20, 2.0),
    "message": (20, 1.0),  # chat messages one person posts
    "refusal_audit": (30, 1.0),  # audit rows of refused actions, per user
    "socket_refusal_audit": (20, 0.5),  # audit rows of refused handshakes, all clients
}
ATRIUM_RATE_LIMITS.update(
    {k: tuple(v) for k, v in json.loads(env_str("ATRIUM_RATE_LIMITS", "{}")).items()}
)
