"""Images attached to a prompt (``exec --image FILE``)."""

from __future__ import annotations

import base64
import mimetypes
from pathlib import Path

from codemode.locations.small_files import read_bytes
from codemode.providers.base import ImageInput

MAX_IMAGE_BYTES = 20 * 1024 * 1024


class ImageProblem(ValueError):
    """An image that cannot be attached; the message names the file and why."""


def load_image(path: Path) -> ImageInput:
    mime, _ = mimetypes.guess_type(path.name)
    if mime is None or not mime.startswith("image/"):
        raise ImageProblem(f"--image {path}: not an image file (use .png, .jpg, .gif or .webp)")
    # A regular file, read no further than the bound: a name in the workspace may be a
    # link a command made (to /dev/zero, a sparse terabyte, a FIFO that never ends).
    try:
        data = read_bytes(path, MAX_IMAGE_BYTES)
    except OSError as exc:
        raise ImageProblem(f"--image {path}: {exc.strerror}") from None
    return ImageInput(mime_type=mime, data=base64.b64encode(data).decode("ascii"))
