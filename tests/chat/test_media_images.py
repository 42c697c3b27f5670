"""chat.media.images: Pillow with bomb limits, thumbnails and posters, a video's stills."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from chat.media import formats as media_formats
from chat.media import images as media_images
from chat.media.formats import MediaRejected
from examples.media import server as samples

PNG = samples.encode_image(samples.render_picture(1600, 900, "png"), "png")
JPEG = samples.encode_image(samples.render_picture(640, 360, "jpeg"), "jpeg")
WAV = samples.render_tone(2.5, 440.0)
AVI = samples.build_avi(samples.render_frames(24, 320, 240), 320, 240, fps=12)
ZIP = samples.build_zip()


@pytest.mark.parametrize("side", [8_000, 50_000])
def test_png_bombs_are_rejected_before_decoding(side: int) -> None:
    # 8000² = 64 MP is below Pillow's own default limit (89 MP): our limit applies.
    bomb = samples.build_png_bomb(side)
    with pytest.raises(MediaRejected) as caught:
        media_images.inspect_image(io.BytesIO(bomb), "PNG")
    assert caught.value.reason == (
        f"The image is larger than 50 megapixels ({side} × {side} pixels; "
        "decompression bomb protection)."
    )
    assert Image.MAX_IMAGE_PIXELS == 89_478_485  # the process-wide default is restored


def test_image_safety_escalates_pillows_bomb_warning() -> None:
    import warnings

    with media_images.image_safety():
        assert Image.MAX_IMAGE_PIXELS == media_images.MAX_IMAGE_PIXELS
        with pytest.raises(Image.DecompressionBombWarning):
            warnings.warn("too big", Image.DecompressionBombWarning, stacklevel=1)
    assert Image.MAX_IMAGE_PIXELS == 89_478_485


def test_damaged_images_are_rejected() -> None:
    with pytest.raises(MediaRejected) as caught:
        media_images.inspect_image(io.BytesIO(PNG[:3000]), "PNG")
    assert caught.value.reason.startswith("The image data is damaged or incomplete")
    with pytest.raises(MediaRejected) as caught:
        media_images.inspect_image(io.BytesIO(JPEG), "PNG")  # only the declared format
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
    facts = media_images.inspect_image(io.BytesIO(buffer.getvalue()), "JPEG")
    assert (facts.width, facts.height) == (200, 400)
    thumbnail = _decode(facts.thumbnail.data)
    assert thumbnail.format == "WEBP" and thumbnail.size == (160, 320)
    assert facts.poster is None and facts.frames == 1


def test_animated_images_get_frame_zero_as_poster() -> None:
    frames = [Image.new("RGB", (600, 400), colour) for colour in ("red", "green", "blue")]
    buffer = io.BytesIO()
    frames[0].save(buffer, format="GIF", save_all=True, append_images=frames[1:], duration=100)
    facts = media_images.inspect_image(io.BytesIO(buffer.getvalue()), "GIF")
    assert facts.frames == 3 and facts.poster is not None
    poster = _decode(facts.poster.data).convert("RGB")
    assert poster.size == (600, 400)
    red, green, blue = poster.getpixel((300, 200))
    assert red > 200 and green < 60 and blue < 60  # frame 0, not a later one
    assert max(_decode(facts.thumbnail.data).size) == 320


def test_avi_header_hints_and_first_jpeg_frame() -> None:
    hints = media_formats.avi_hints(io.BytesIO(AVI), len(AVI))
    assert (hints.width, hints.height, hints.duration) == (320, 240, 2.0)
    offset, length = hints.first_frame
    frame = AVI[offset : offset + length]
    assert frame == samples.render_frames(24, 320, 240)[0]
    poster, thumbnail = media_images.video_stills(frame)
    assert _decode(poster.data).size == (320, 240)
    assert _decode(thumbnail.data).size == (320, 240)
