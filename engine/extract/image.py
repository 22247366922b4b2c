"""Images (PNG, JPEG, TIFF with its pages, WebP, BMP): their text, read by OCR (engine/extract/ocr.py).

Each frame of a multi-page TIFF is a page. Before any pixel is decoded, the
header's size is checked: an image over `ocr.MAX_IMAGE_PIXELS` (a 20,000 ×
20,000 PNG, a decompression-bomb TIFF) is refused, as is a TIFF declaring
more pages than `Limits.max_pages`. A truncated or damaged file is refused
with Pillow's reason. With the setting `ocr = off`, images are refused
saying how to have them read.

Runs in an extraction worker process (engine/extract/pool.py).
"""

from __future__ import annotations

import io

from ..config import ENV
from ..errors import KxError, Status, invalid
from ..formats import SUFFIX_MEDIA
from .base import Extracted, Limits, ocr_extractor
from .pdf import PAGE_SEPARATOR, _clean_pages

EXTRACTOR_VERSION = 1
# Pillow's name for an image kind -> the suffix whose media type it stores (an MPO is a JPEG with more frames)
_PILLOW_SUFFIX = {"MPO": ".jpeg"}


def extractor_id() -> str:
    import PIL

    return f"image/pillow-{PIL.__version__}/{EXTRACTOR_VERSION}"


def extract_image(data: bytes, label: str, limits: Limits) -> Extracted:
    from PIL import Image, ImageSequence, UnidentifiedImageError

    from . import ocr

    if not limits.ocr:
        raise invalid(f"{label} is an image, and OCR is off (the setting ocr = off); set ocr = auto "
                      "(e.g. kx --set ocr=auto ...) to read the text in images")
    # every frame's size is checked below, before it is decoded, so the refusal can say how large it is
    Image.MAX_IMAGE_PIXELS = None
    try:
        image = Image.open(io.BytesIO(data))
    except UnidentifiedImageError:
        raise invalid(f"{label} is not a readable image (its first bytes say image, but Pillow cannot read it); "
                      "it may be damaged: re-save or re-download it") from None
    except (OSError, ValueError, SyntaxError) as exc:
        raise invalid(f"{label} is not a readable image ({exc}); re-save or re-download it") from None
    kind = image.format or "image"
    frames = getattr(image, "n_frames", 1)
    if frames > limits.max_pages:
        raise KxError(Status.RESOURCE_EXHAUSTED, f"{label} has {frames:,} pages, over the {limits.max_pages:,}-page "
                      f"limit ({ENV.extract_max_pages}); split it or raise the limit")
    sizes = []
    for frame in ImageSequence.Iterator(image):
        if frame.width * frame.height > ocr.MAX_IMAGE_PIXELS:
            raise _too_large(label, frame.size)
        sizes.append((float(frame.width), float(frame.height)))

    def render(number: int, scale: float):
        import numpy as np

        try:
            image.seek(number - 1)
            rgb = np.asarray(image.convert("RGB"))
        except (OSError, ValueError, SyntaxError, EOFError) as exc:
            raise invalid(f"{label} is not a readable image: page {number} cannot be decoded ({exc}); it may be "
                          "truncated or damaged: re-save or re-download it") from None
        return ocr.resized(np.ascontiguousarray(rgb[..., ::-1]), scale)  # the models were trained on BGR

    pages = ocr.read_pages(render, sizes, range(1, len(sizes) + 1), label, limits)
    texts = _clean_pages([pages[n].text for n in range(1, len(sizes) + 1)])
    if not any(t.strip() for t in texts):
        raise invalid(f"{label} is an image in which OCR found no text; there is nothing to index")
    starts, offset = [], 0
    for text in texts:
        starts.append(offset)
        offset += len(text) + len(PAGE_SEPARATOR)
    confidence = ocr.mean_confidence(list(pages.values()))
    media = SUFFIX_MEDIA.get(_PILLOW_SUFFIX.get(kind, "." + kind.lower()), "image/" + kind.lower())
    return Extracted(text=PAGE_SEPARATOR.join(texts), media_type=media,
                     page_starts=tuple(starts), notes=ocr.low_confidence_notes(label, pages),
                     extractor=ocr_extractor(extractor_id(), ocr.ocr_id(), confidence),
                     metadata={"pages": str(len(sizes)), "ocr_pages": str(len(sizes))})


def _too_large(label: str, size: tuple[int, int]) -> KxError:
    from . import ocr

    return KxError(Status.RESOURCE_EXHAUSTED, f"{label} was refused before decoding: it is {size[0]:,} × "
                   f"{size[1]:,} pixels, over the "
                   f"{ocr.MAX_IMAGE_PIXELS:,}-pixel limit for OCR (a decompression bomb?); scale it down and add "
                   "it again")
