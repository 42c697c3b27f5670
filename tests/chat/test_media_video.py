"""Video posters from the first frame (chat.media.video, PyAV): MP4 and WebM made here with
FFmpeg's own encoders, processed as a member's upload or a tool's video would be; damaged
or unusual files get no poster and are still stored."""

from __future__ import annotations

import io
from pathlib import Path

import av
import pytest
from PIL import Image

from chat.media import processing as media_processing
from chat.media.video import video_first_frame
from tests.chat.test_media_processing import RecordingStore

ORANGE = (240, 120, 20)


def make_video(
    path: Path, *, container: str, codec: str, size: tuple[int, int] = (320, 240)
) -> Path:
    """A one-second clip whose frames are all ``ORANGE``."""
    picture = Image.new("RGB", size, ORANGE)
    with av.open(str(path), mode="w", format=container) as output:
        stream = output.add_stream(codec, rate=10)
        stream.width, stream.height = size
        stream.pix_fmt = "yuv420p"
        for _ in range(10):
            for packet in stream.encode(av.VideoFrame.from_image(picture)):
                output.mux(packet)
        for packet in stream.encode():
            output.mux(packet)
    return path


def _near(pixel: tuple[int, ...], expected: tuple[int, int, int], slack: int = 24) -> bool:
    return all(abs(a - b) <= slack for a, b in zip(pixel[:3], expected, strict=True))


@pytest.mark.parametrize(
    ("container", "codec", "mime", "suffix"),
    [("mp4", "mpeg4", "video/mp4", "mp4"), ("webm", "libvpx", "video/webm", "webm")],
)
def test_a_videos_first_frame_becomes_its_poster_and_thumbnail(
    tmp_path: Path, container: str, codec: str, mime: str, suffix: str
) -> None:
    staged = make_video(tmp_path / f"clip.{suffix}", container=container, codec=codec)
    store = RecordingStore()
    result = media_processing.process_staged_file(
        staged, kind="video", declared_mime=mime, max_bytes=10**9, store=store
    )
    assert result.poster_path.endswith(".poster960.webp")
    assert result.thumbnail_path.endswith(".thumb320.webp")
    frame = video_first_frame(staged, mime=mime)
    assert frame is not None and frame.size == (320, 240)
    assert _near(frame.getpixel((160, 120)), ORANGE)


def test_damaged_audio_only_and_unlisted_videos_get_no_poster_but_are_stored(
    tmp_path: Path,
) -> None:
    whole = make_video(tmp_path / "clip.mp4", container="mp4", codec="mpeg4").read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(whole[: len(whole) // 3])  # the index (moov) is at the end: unreadable
    garbage = tmp_path / "garbage.mp4"
    garbage.write_bytes(whole[:12] + b"\x00" * 4000)
    for damaged in (cut, garbage):
        assert video_first_frame(damaged, mime="video/mp4") is None
        result = media_processing.process_staged_file(
            damaged,
            kind="video",
            declared_mime="video/mp4",
            max_bytes=10**9,
            store=RecordingStore(),
        )
        assert result.storage_path and not result.poster_path and not result.thumbnail_path
    # A type with no demuxer listed is never opened by FFmpeg.
    assert video_first_frame(tmp_path / "clip.mp4", mime="application/octet-stream") is None


def test_a_frame_larger_than_the_image_pixel_limit_is_not_decoded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    staged = make_video(tmp_path / "clip.mp4", container="mp4", codec="mpeg4")
    monkeypatch.setattr("chat.media.video.MAX_IMAGE_PIXELS", 320 * 240 - 1)
    assert video_first_frame(staged, mime="video/mp4") is None


def test_the_poster_is_a_real_picture(tmp_path: Path) -> None:
    staged = make_video(tmp_path / "clip.webm", container="webm", codec="libvpx")
    result = media_processing.derive(
        media_processing.hash_file(staged),
        media_processing.check_declared_type(
            staged.read_bytes()[:64], declared="video/webm", kind="video"
        ),
    )
    assert result.poster is not None
    poster = Image.open(io.BytesIO(result.poster.data)).convert("RGB")
    assert poster.size == (320, 240) and _near(poster.getpixel((10, 10)), ORANGE)
