"""chat.media.formats (pure): the magic-number table, declared types, container hints.

Plain tests on the real files the `media` example server produces: no database, no Pillow.
"""

from __future__ import annotations

import io
import struct

import pytest

from chat.media import formats as media_formats
from chat.media.formats import MediaRejected
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
    found = media_formats.identify(content[: media_formats.HEAD_BYTES])
    assert found is not None and found.label == label


def test_content_without_a_row_is_still_described() -> None:
    assert media_formats.describe_content(b"<!DOCTYPE html><html>") == "HTML document"
    assert media_formats.describe_content(b"<?xml version='1.0'?><svg>") == "SVG image"
    assert media_formats.describe_content("plain words, été".encode()) == "text"
    assert media_formats.describe_content(bytes(range(1, 30))) == "unrecognized binary data"


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
        media_formats.check_declared_type(content[:512], declared=declared, kind=kind)
    assert caught.value.reason.startswith(reason)


def test_verified_types_and_opaque_binaries() -> None:
    wav = media_formats.check_declared_type(WAV[:512], declared="audio/x-wav", kind="audio")
    assert wav.mime == "audio/x-wav" and wav.signature and wav.signature.label == "WAV audio"
    jpeg = media_formats.check_declared_type(JPEG[:512], declared="image/jpg", kind="image")
    assert jpeg.mime == "image/jpeg" and jpeg.signature.pillow_format == "JPEG"
    # A file type without a row cannot be checked: it is kept, but only as a download.
    blob = media_formats.check_declared_type(b"\x00\x01", declared="text/html", kind="binary")
    assert blob.mime == "application/octet-stream" and blob.signature is None
    assert media_formats.served_type(kind="binary", declared="text/html") == (
        "application/octet-stream"
    )
    assert media_formats.served_type(kind="image", declared="image/jpg") == "image/jpeg"
    assert media_formats.served_type(kind="audio", declared="audio/wav") == "audio/wav"


def test_wav_duration_from_the_header() -> None:
    hints = media_formats.wav_hints(io.BytesIO(WAV), len(WAV))
    assert hints.duration == 2.5


@pytest.mark.parametrize("moov_last", [False, True])
def test_mp4_duration_from_mvhd(moov_last: bool) -> None:
    data = _mp4_with_duration(600, 1500, moov_last=moov_last)
    assert media_formats.mp4_hints(io.BytesIO(data), len(data)).duration == 2.5


def test_malformed_containers_give_no_hints_instead_of_errors() -> None:
    signature = media_formats.identify(AVI)
    broken = AVI[:40] + b"\xff" * 30
    hints = media_formats.container_hints(
        io.BytesIO(broken), file_size=len(broken), signature=signature
    )
    assert hints.duration is None and hints.first_frame is None
