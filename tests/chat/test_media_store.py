"""chat.media_store, the file side: magic numbers, Pillow checks, container hints, stills.

No database and no worker: these are the checks `persist_tool_media` relies on, run on the
real files the `media` example server produces.
"""

from __future__ import annotations

import hashlib
import io
import struct
from pathlib import Path

import pytest
from PIL import Image

from chat import media_store
from chat.media_store import MediaRejected
from examples.media import server as samples

PNG = samples.encode_image(samples.render_picture(1600, 900, "png"), "png")
JPEG = samples.encode_image(samples.render_picture(640, 360, "jpeg"), "jpeg")
WAV = samples.render_tone(2.5, 440.0)
AVI = samples.build_avi(samples.render_frames(24, 320, 240), 320, 240, fps=12)
ZIP = samples.build_zip()


def _mp4_with_duration(timescale: int, duration: int, *, moov_last: bool) -> bytes:
    def box(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I4s", 8 + len(body), kind) + body

    mvhd = box(b"mvhd", bytes(4) + struct.pack(">IIII", 0, 0, timescale, duration) + bytes(80))
    ftyp = box(b"ftyp", b"isom" + bytes(4) + b"isomiso2mp41")
    moov = box(b"moov", mvhd)
    mdat = box(b"mdat", bytes(1000))
    return ftyp + (mdat + moov if moov_last else moov + mdat)


@pytest.mark.parametrize(
    ("content", "label"),
    [
        (PNG, "PNG image"),
        (JPEG, "JPEG image"),
        (b"GIF89a" + bytes(20), "GIF image"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "WebP image"),
        (WAV, "WAV audio"),
        (AVI, "AVI video"),
        (b"ID3\x04\x00" + bytes(20), "MP3 audio"),
        (b"\xff\xfb\x90\x64" + bytes(20), "MP3 audio"),  # MPEG-1 layer III frame
        (b"\xff\xf1\x50\x80" + bytes(20), "AAC audio"),  # ADTS: layer bits 00
        (b"OggS\x00\x02" + bytes(20), "Ogg media"),
        (b"fLaC\x00\x00\x00\x22" + bytes(20), "FLAC audio"),
        (_mp4_with_duration(1000, 5000, moov_last=False), "MP4 media"),
        (b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81", "WebM/Matroska media"),
        (b"%PDF-1.7\n", "PDF document"),
        (ZIP, "ZIP archive"),
        (b"\x7fELF\x02\x01\x01", "Linux executable"),
    ],
)
def test_magic_number_table_identifies_content(content: bytes, label: str) -> None:
    found = media_store.identify(content[: media_store.HEAD_BYTES])
    assert found is not None and found.label == label


def test_content_without_a_row_is_still_described() -> None:
    assert media_store.describe_content(b"<!DOCTYPE html><html>") == "HTML document"
    assert media_store.describe_content(b"<?xml version='1.0'?><svg>") == "SVG image"
    assert media_store.describe_content("plain words, été".encode()) == "text"
    assert media_store.describe_content(bytes(range(1, 30))) == "unrecognized binary data"


@pytest.mark.parametrize(
    ("content", "declared", "kind", "reason"),
    [
        (
            ZIP,
            "image/png",
            "image",
            "The file's content (ZIP archive) does not match its declared type image/png.",
        ),
        (
            PNG,
            "image/jpeg",
            "image",
            "The file's content (PNG image) does not match its declared type image/jpeg.",
        ),
        (
            ZIP,
            "audio/wav",
            "audio",
            "The file's content (ZIP archive) does not match its declared type audio/wav.",
        ),
        (
            WAV,
            "video/x-msvideo",
            "video",
            "The file's content (WAV audio) does not match its declared type video/x-msvideo.",
        ),
        (
            ZIP,
            "application/pdf",
            "binary",
            "The file's content (ZIP archive) does not match its declared type application/pdf.",
        ),
        (b"<svg/>", "image/svg+xml", "image", "Images of type image/svg+xml are not accepted"),
        (WAV, "audio/x-unknown", "audio", "Audio of type audio/x-unknown cannot be verified"),
    ],
)
def test_declared_type_must_match_the_content(
    content: bytes, declared: str, kind: str, reason: str
) -> None:
    with pytest.raises(MediaRejected) as caught:
        media_store.check_declared_type(content[:512], declared=declared, kind=kind)
    assert caught.value.reason.startswith(reason)


def test_verified_types_and_opaque_binaries() -> None:
    wav = media_store.check_declared_type(WAV[:512], declared="audio/x-wav", kind="audio")
    assert wav.mime == "audio/x-wav" and wav.signature and wav.signature.label == "WAV audio"
    jpeg = media_store.check_declared_type(JPEG[:512], declared="image/jpg", kind="image")
    assert jpeg.mime == "image/jpeg" and jpeg.signature.pillow_format == "JPEG"
    # A file type without a row cannot be checked: it is kept, but only as a download.
    blob = media_store.check_declared_type(b"\x00\x01", declared="text/html", kind="binary")
    assert blob.mime == "application/octet-stream" and blob.signature is None
    assert media_store.served_type(kind="binary", declared="text/html") == (
        "application/octet-stream"
    )
    assert media_store.served_type(kind="image", declared="image/jpg") == "image/jpeg"
    assert media_store.served_type(kind="audio", declared="audio/wav") == "audio/wav"


@pytest.mark.parametrize("side", [8_000, 50_000])
def test_png_bombs_are_rejected_before_decoding(side: int) -> None:
    # 8000² = 64 MP is below Pillow's own default limit (89 MP): our limit applies.
    bomb = samples.build_png_bomb(side)
    with pytest.raises(MediaRejected) as caught:
        media_store.inspect_image(io.BytesIO(bomb), "PNG")
    assert caught.value.reason == (
        f"The image is larger than 50 megapixels ({side} × {side} pixels; "
        "decompression bomb protection)."
    )
    assert Image.MAX_IMAGE_PIXELS == 89_478_485  # the process-wide default is restored


def test_image_safety_escalates_pillows_bomb_warning() -> None:
    import warnings

    with media_store.image_safety():
        assert Image.MAX_IMAGE_PIXELS == media_store.MAX_IMAGE_PIXELS
        with pytest.raises(Image.DecompressionBombWarning):
            warnings.warn("too big", Image.DecompressionBombWarning, stacklevel=1)
    assert Image.MAX_IMAGE_PIXELS == 89_478_485


def test_damaged_images_are_rejected() -> None:
    with pytest.raises(MediaRejected) as caught:
        media_store.inspect_image(io.BytesIO(PNG[:3000]), "PNG")
    assert caught.value.reason.startswith("The image data is damaged or incomplete")
    with pytest.raises(MediaRejected) as caught:
        media_store.inspect_image(io.BytesIO(JPEG), "PNG")  # only the declared format
    assert caught.value.reason == "The file could not be read as a PNG image."


def _decode(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


def test_thumbnail_is_small_and_follows_exif_orientation() -> None:
    picture = samples.render_picture(400, 200, "rotated")
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90° clockwise to display"
    buffer = io.BytesIO()
    picture.save(buffer, format="JPEG", exif=exif.tobytes())
    facts = media_store.inspect_image(io.BytesIO(buffer.getvalue()), "JPEG")
    assert (facts.width, facts.height) == (200, 400)
    thumbnail = _decode(facts.thumbnail.data)
    assert thumbnail.format == "WEBP" and thumbnail.size == (160, 320)
    assert facts.poster is None and facts.frames == 1


def test_animated_images_get_frame_zero_as_poster() -> None:
    frames = [Image.new("RGB", (600, 400), colour) for colour in ("red", "green", "blue")]
    buffer = io.BytesIO()
    frames[0].save(buffer, format="GIF", save_all=True, append_images=frames[1:], duration=100)
    facts = media_store.inspect_image(io.BytesIO(buffer.getvalue()), "GIF")
    assert facts.frames == 3 and facts.poster is not None
    poster = _decode(facts.poster.data).convert("RGB")
    assert poster.size == (600, 400)
    red, green, blue = poster.getpixel((300, 200))
    assert red > 200 and green < 60 and blue < 60  # frame 0, not a later one
    assert max(_decode(facts.thumbnail.data).size) == 320


def test_wav_duration_from_the_header() -> None:
    hints = media_store.wav_hints(io.BytesIO(WAV), len(WAV))
    assert hints.duration == 2.5


def test_avi_header_hints_and_first_jpeg_frame() -> None:
    hints = media_store.avi_hints(io.BytesIO(AVI), len(AVI))
    assert (hints.width, hints.height, hints.duration) == (320, 240, 2.0)
    offset, length = hints.first_frame
    frame = AVI[offset : offset + length]
    assert frame == samples.render_frames(24, 320, 240)[0]
    poster, thumbnail = media_store.video_stills(frame)
    assert _decode(poster.data).size == (320, 240)
    assert _decode(thumbnail.data).size == (320, 240)


@pytest.mark.parametrize("moov_last", [False, True])
def test_mp4_duration_from_mvhd(moov_last: bool) -> None:
    data = _mp4_with_duration(600, 1500, moov_last=moov_last)
    assert media_store.mp4_hints(io.BytesIO(data), len(data)).duration == 2.5


def test_malformed_containers_give_no_hints_instead_of_errors() -> None:
    signature = media_store.identify(AVI)
    broken = AVI[:40] + b"\xff" * 30
    hints = media_store.container_hints(
        io.BytesIO(broken), file_size=len(broken), signature=signature
    )
    assert hints.duration is None and hints.first_frame is None


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
    result = media_store.process_staged_file(
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
        media_store.process_staged_file(
            empty, kind="binary", declared_mime="x/y", max_bytes=10, store=RecordingStore()
        )
    big = tmp_path / "big"
    big.write_bytes(bytes(3 * 1024 * 1024))
    with pytest.raises(MediaRejected, match=r"larger than the 2 MB limit"):
        media_store.process_staged_file(
            big,
            kind="binary",
            declared_mime="x/y",
            max_bytes=2 * 1024 * 1024,
            store=RecordingStore(),
        )


def test_hashing_streams_in_chunks(tmp_path: Path) -> None:
    data = bytes(range(256)) * (media_store.HASH_CHUNK // 256 * 3 + 7)
    path = tmp_path / "data"
    path.write_bytes(data)
    staged = media_store.hash_file(path)
    assert staged.sha256 == hashlib.sha256(data).hexdigest() and staged.size == len(data)
    assert staged.head == data[: media_store.HEAD_BYTES]


def test_staging_keys_cannot_escape_the_staging_root() -> None:
    assert media_store.staging_file("../../etc/passwd") is None
    assert media_store.staging_file("") is None
    assert media_store.staging_file("a" * 32).name == "a" * 32
