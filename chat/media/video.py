"""A video's poster: its first frame, decoded by FFmpeg through PyAV (issue 26; docs/media.md).

Runs in the Celery worker only (blocking, CPU-bound), on a file that already passed the
signature check. Untrusted input, so the work is bounded:

- the container is opened with the demuxer its signature names (FFmpeg never probes the
  file against every format it knows);
- only common video decoders are used (:data:`DECODERS`);
- the frame size is checked against the image pixel limit before any frame is decoded;
- at most :data:`MAX_PACKETS` packets are read to find a frame.

No frame (an audio-only file, an unusual codec, a damaged file) means no poster, never an
error: the video is still stored and plays.
"""

from __future__ import annotations

import logging
from pathlib import Path

from PIL import Image

from .images import MAX_IMAGE_PIXELS

log = logging.getLogger(__name__)

# The demuxer for each signature (chat.media.formats) that can hold video.
DEMUXERS = {
    "video/mp4": "mp4",
    "video/quicktime": "mov",
    "video/webm": "matroska",
    "video/ogg": "ogg",
    "video/x-msvideo": "avi",
}
DECODERS = frozenset({"h264", "hevc", "vp8", "vp9", "av1", "libdav1d", "mpeg4", "mjpeg", "theora"})
MAX_PACKETS = 240  # a first frame sits in the first packets; a damaged file ends here
PROBE_BYTES = "5000000"


def video_first_frame(path: Path, *, mime: str) -> Image.Image | None:
    """The first decodable frame of ``path``'s first video stream, as an RGB image."""
    # PyAV (FFmpeg's libraries) is loaded when a video is read, not when a process starts
    # (≈ 50 ms of every web, worker and `manage.py` start otherwise).
    import av

    demuxer = DEMUXERS.get(mime)
    if demuxer is None:
        return None
    try:
        with av.open(
            str(path),
            format=demuxer,
            options={"probesize": PROBE_BYTES, "analyzeduration": PROBE_BYTES},
        ) as container:
            stream = next(iter(container.streams.video), None)
            if stream is None or stream.codec_context.name not in DECODERS:
                return None
            if not _size_allowed(stream.codec_context.width, stream.codec_context.height):
                return None
            for count, packet in enumerate(container.demux(stream), start=1):
                for frame in packet.decode():
                    if not _size_allowed(frame.width, frame.height):
                        return None
                    return frame.to_image()
                if count >= MAX_PACKETS:
                    break
    except (av.FFmpegError, OSError, ValueError) as exc:
        log.info("no video poster for %s: %s", path.name, exc)
    return None


def _size_allowed(width: int, height: int) -> bool:
    return 0 < width * height <= MAX_IMAGE_PIXELS
