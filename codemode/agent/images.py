"""Images attached to a prompt (``exec --image FILE``)."""

from __future__ import annotations

import base64
import mimetypes
from pathlib import Path

from codemode.providers.base import ImageInput

MAX_IMAGE_BYTES = 20 * 1024 * 1024


class ImageProblem(ValueError):
    """An image that cannot be attached; the message names the file and why."""


def load_image(path: Path) -> ImageInput:
    mime, _ = mimetypes.guess_type(path.name)
    if mime is None or not mime.startswith("image/"):
        raise ImageProblem(f"--image {path}: not an image file (use .png, .jpg, .gif or .webp)")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ImageProblem(f"--image {path}: {exc.strerror}") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageProblem(f"--image {path}: {len(data)} bytes, over {MAX_IMAGE_BYTES}")
    return ImageInput(mime_type=mime, data=base64.b64encode(data).decode("ascii"))
