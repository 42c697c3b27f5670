"""Staging of tool-result media on the request path (DESIGN §4, stage 1 of 3).

The normalizer decodes each large payload once and hands it here; we write it to durable
staging and keep no copy. The tool call's transaction then creates `MediaAsset` rows
(status `staged`) and, on commit, enqueues `persist_tool_media` for each.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from django.conf import settings

from mcp_bridge.normalize import StagedPayload


def staging_root() -> Path:
    root = Path(settings.MEDIA_STAGING_ROOT)
    root.mkdir(parents=True, exist_ok=True)
    return root


def stage_payload(payload: StagedPayload) -> dict[str, Any]:
    """Write the decoded bytes to a staging file (fsynced) and describe them."""
    key = uuid.uuid4().hex
    path = staging_root() / key
    with open(path, "wb") as handle:
        handle.write(payload.data)
        handle.flush()
        os.fsync(handle.fileno())
    return {
        "stagingKey": key,
        "status": "staged",
        "size": len(payload.data),
        "kind": payload.kind,
        "declaredMime": payload.mime_type,
        "filename": payload.filename,
    }


def staged_parts(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Parts whose payload waits in staging (they carry an `asset.stagingKey`)."""
    return [p for p in parts if isinstance(p.get("asset"), dict) and p["asset"].get("stagingKey")]
