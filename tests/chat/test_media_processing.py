"""chat.media.processing and media_storage: hashing, verifying, naming by digest, keys.

No database and no worker: these are the checks `persist_tool_media` relies on.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from chat.media import formats as media_formats
from chat.media import processing as media_processing
from chat.media import storage as media_storage
from chat.media.formats import MediaRejected
from examples.media import server as samples

PNG = samples.encode_image(samples.render_picture(1600, 900, "png"), "png")
JPEG = samples.encode_image(samples.render_picture(640, 360, "jpeg"), "jpeg")
WAV = samples.render_tone(2.5, 440.0)
AVI = samples.build_avi(samples.render_frames(24, 320, 240), 320, 240, fps=12)
ZIP = samples.build_zip()


class RecordingStore:
    def __init__(self) -> None:
        self.names: dict[str, int] = {}

    def __call__(
        self, name: str, *, path: Path | None = None, data: bytes | None = None, size: int
    ) -> str:
        content = path.read_bytes() if path is not None else data
        assert content is not None and len(content) == size
        self.names[name] = size
        return name


def test_processing_hashes_verifies_and_names_content_by_digest(tmp_path: Path) -> None:
    staged = tmp_path / "staged"
    staged.write_bytes(AVI)
    store = RecordingStore()
    result = media_processing.process_staged_file(
        staged, kind="video", declared_mime="video/x-msvideo", max_bytes=10**9, store=store
    )
    digest = hashlib.sha256(AVI).hexdigest()
    assert result.sha256 == digest and result.size == len(AVI)
    assert result.storage_path == f"sha256/{digest[:2]}/{digest[2:4]}/{digest}"
    assert result.poster_path.endswith(".poster960.webp")
    assert result.thumbnail_path.endswith(".thumb320.webp")
    assert set(store.names) == {result.storage_path, result.poster_path, result.thumbnail_path}
    assert (result.width, result.height, result.duration) == (320, 240, 2.0)


def test_empty_and_oversized_files_are_rejected(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with pytest.raises(MediaRejected, match="The file is empty"):
        media_processing.process_staged_file(
            empty, kind="binary", declared_mime="x/y", max_bytes=10, store=RecordingStore()
        )
    big = tmp_path / "big"
    big.write_bytes(bytes(3 * 1024 * 1024))
    with pytest.raises(MediaRejected, match=r"larger than the 2 MB limit"):
        media_processing.process_staged_file(
            big,
            kind="binary",
            declared_mime="x/y",
            max_bytes=2 * 1024 * 1024,
            store=RecordingStore(),
        )


def test_hashing_streams_in_chunks(tmp_path: Path) -> None:
    data = bytes(range(256)) * (media_processing.HASH_CHUNK // 256 * 3 + 7)
    path = tmp_path / "data"
    path.write_bytes(data)
    staged = media_processing.hash_file(path)
    assert staged.sha256 == hashlib.sha256(data).hexdigest() and staged.size == len(data)
    assert staged.head == data[: media_formats.HEAD_BYTES]


def test_staging_keys_cannot_escape_the_staging_root() -> None:
    assert media_storage.staging_file("../../etc/passwd") is None
    assert media_storage.staging_file("") is None
    assert media_storage.staging_file("a" * 32).name == "a" * 32


def test_a_staged_file_shorter_than_recorded_is_rejected_not_stored(tmp_path: Path) -> None:
    """Staged uploads are not fsynced: after a power loss the file may be short, and the
    worker must refuse it rather than store a truncated copy under a new digest."""
    staged = tmp_path / "staged"
    staged.write_bytes(PNG[: len(PNG) // 2])
    store = RecordingStore()
    with pytest.raises(MediaRejected, match="arrived incomplete"):
        media_processing.process_staged_file(
            staged,
            kind="binary",
            declared_mime="application/octet-stream",
            max_bytes=10**9,
            store=store,
            expected_size=len(PNG),
        )
    assert store.names == {}
