"""Content blocks of a result (pure apart from the staging callback): text, image,
audio, embedded resources and resource links, in order, each into canonical parts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from mcp_bridge.uimeta import (
    OCTET_STREAM,
    clean_str,
    describe_type,
    is_http_url,
    is_ui_uri,
    parse_mime,
    printable,
    ui_flavor,
)

from .fields import clean_uri, filename_from_uri, optional_text
from .limits import MAX_DESCRIPTION_LENGTH, MAX_NAME_LENGTH, TextBudget
from .media import MEDIA_MIME_RE, MediaReader, media_kind_for
from .result import NormalizedResult, block_audience
from .ui_resource import read_ui_resource

CLICKABLE_SCHEMES = ("http", "https")


class BlockReader:
    """Reads blocks one by one into ``result``; the text budget spans the whole result."""

    def __init__(
        self, *, result: NormalizedResult, media: MediaReader, max_text: int, max_document: int
    ) -> None:
        self.result = result
        self.media = media
        self.text = TextBudget(max_text)
        self.max_document = max_document
        self.truncation_notice: dict[str, Any] | None = None

    def finish(self) -> None:
        """Once every block is read: the truncation notice says how much was cut in all."""
        if self.truncation_notice is not None:
            self.truncation_notice["message"] = self.text.notice()

    def _add_text(
        self, text: str, audience: list[str] | None, extra: dict[str, Any] | None = None
    ) -> None:
        kept, cut = self.text.take(text)
        if cut and self.truncation_notice is not None:
            return  # already past the budget: nothing more is kept
        if kept or not cut:
            part = {"type": "text", "text": clean_str(kept), **(extra or {})}
            self.result.add_part(part, audience)
        if cut:
            # The message is written by finish(), once the total cut is known.
            self.truncation_notice = self.result.add_error("text_truncated", "")

    # ------------------------------------------------------------------ blocks

    def read(self, block: Any, number: int) -> None:
        if not isinstance(block, Mapping):
            self.result.add_error(
                "invalid_block",
                f"Content block {number} is a {describe_type(block)}, not an object; "
                "it was skipped.",
            )
            return
        block_type = block.get("type")
        audience = block_audience(block)
        if block_type == "text":
            text = block.get("text")
            if not isinstance(text, str):
                self.result.add_error("missing_field", f"Text block {number} has no text.")
                return
            self._add_text(text, audience)
        elif block_type == "image":
            self._inline_media_block(block, "image", "Image", audience)
        elif block_type == "audio":
            self._inline_media_block(block, "audio", "Audio", audience)
        elif block_type == "resource":
            self._embedded_resource(block, number, audience)
        elif block_type == "resource_link":
            self._resource_link(block, number, audience)
        elif isinstance(block_type, str):
            self.result.add_error(
                "unknown_block_type",
                f"Unknown content block type {printable(block_type, 40)!r} was skipped.",
            )
        else:
            self.result.add_error(
                "invalid_block", f"Content block {number} has no type; it was skipped."
            )

    def _inline_media_block(
        self,
        block: Mapping[str, Any],
        kind: Literal["image", "audio"],
        label: str,
        audience: list[str] | None,
    ) -> None:
        mime = parse_mime(block.get("mimeType"))
        if mime is None:
            self.result.add_error("missing_field", f"{label} block has no valid MIME type.")
            return
        if mime.type != kind or not MEDIA_MIME_RE.match(mime.essence):
            self.result.add_error(
                "unsupported_mime",
                f"{label} block has unsupported MIME type {printable(mime.essence, 60)!r}.",
            )
            return
        self.media.read(
            block.get("data"),
            kind=kind,
            mime=mime.essence,
            label=label,
            filename=None,
            source_uri=None,
            audience=audience,
        )

    def _embedded_resource(
        self, block: Mapping[str, Any], number: int, audience: list[str] | None
    ) -> None:
        resource = block.get("resource")
        if not isinstance(resource, Mapping):
            self.result.add_error(
                "invalid_resource",
                f"Embedded resource block {number} has no resource object; it was skipped.",
            )
            return
        uri = clean_uri(resource.get("uri"))
        mime = parse_mime(resource.get("mimeType"))
        text = resource.get("text")
        blob = resource.get("blob")

        # Only ui:// resources with a UI MIME type render as views; a text/html resource
        # elsewhere is just data.
        if (
            uri is not None
            and mime is not None
            and is_ui_uri(uri)
            and ui_flavor(mime, None) is not None
        ):
            read_ui_resource(
                uri, mime, resource, audience, result=self.result, max_document=self.max_document
            )
            return

        if isinstance(text, str):
            extra: dict[str, Any] = {"uri": uri}
            if mime is not None:
                extra["mimeType"] = str(mime)
            self._add_text(text, audience, extra)
            return
        if blob is not None:
            essence = mime.essence if mime is not None else OCTET_STREAM
            if not MEDIA_MIME_RE.match(essence):
                essence = OCTET_STREAM
            kind = media_kind_for(essence)
            label = {"image": "Image", "audio": "Audio", "video": "Video"}.get(kind, "File")
            self.media.read(
                blob,
                kind=kind,
                mime=essence,
                label=label,
                filename=filename_from_uri(uri),
                source_uri=uri,
                audience=audience,
            )
            return
        shown = printable(uri, 80) if uri else f"in block {number}"
        self.result.add_error(
            "missing_data", f"Embedded resource {shown} has no text or blob content."
        )

    def _resource_link(
        self, block: Mapping[str, Any], number: int, audience: list[str] | None
    ) -> None:
        uri = clean_uri(block.get("uri"))
        if uri is None:
            self.result.add_error(
                "missing_field", f"Resource link in block {number} has no valid URI."
            )
            return
        name = optional_text(block.get("name"), MAX_NAME_LENGTH)
        mime_raw = block.get("mimeType")
        mime = parse_mime(mime_raw) if mime_raw is not None else None
        size = block.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            size = None
        scheme = uri.split(":", 1)[0].lower() if ":" in uri else ""
        clickable = scheme in CLICKABLE_SCHEMES and is_http_url(uri)
        part = {
            "type": "link",
            "uri": uri,
            "name": name or filename_from_uri(uri) or uri[:MAX_NAME_LENGTH],
            "title": optional_text(block.get("title"), MAX_NAME_LENGTH),
            "mimeType": str(mime) if mime is not None else None,
            "description": optional_text(block.get("description"), MAX_DESCRIPTION_LENGTH),
            "size": size,
            "clickable": clickable,
        }
        self.result.add_part(part, audience)
        entry: dict[str, Any] = {"uri": uri, "kind": "link", "mimeType": part["mimeType"]}
        if size is not None:
            entry["size"] = size
        entry["status"] = "external"
        self.result.resources.append(entry)
