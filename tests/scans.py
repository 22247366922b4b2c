"""Scanned pages made from known text, for the OCR tests and benchmarks/ocr.py.

Pages are drawn with Pillow's bundled font (no system fonts needed) at a
page size like A4 at 150 DPI, then saved as PNG/TIFF/JPEG or wrapped in a PDF
that has no text layer (Pillow's PDF writer puts only the image in). A mixed
PDF adds a page with a real text layer, written with pypdfium2.
"""

from __future__ import annotations

import io
import textwrap
from typing import Sequence

PAGE = (1240, 1754)  # A4 at 150 DPI

PARAGRAPHS = (
    "The committee met on a cold morning in the old library to discuss the future of the river crossing. "
    "Several members argued that the wooden bridge should be repaired before the spring floods arrived.",
    "Careful measurements showed that the eastern pillars had shifted by almost four centimetres since the "
    "last survey, which worried the engineers more than the cost of the work itself.",
    "After a long debate the members agreed to close the bridge to heavy traffic and to ask the county for "
    "an emergency grant, while a smaller team would study a new crossing further downstream.",
    "Letters were sent to every farmer whose land bordered the river, explaining the closure and inviting "
    "them to a public meeting at the village hall on the first Monday of the following month.",
)


HARBOUR = (
    "The harbour board reported that the northern quay will be dredged in August, when the tides are lowest "
    "and the fishing fleet is away at the summer grounds.",
    "A new crane was ordered from a foundry in the south, and the old one will be sold to the museum, which "
    "has offered to restore it for visitors.",
    "The board also agreed to publish the tide tables in the weekly newspaper again, because many readers "
    "had written to ask for them.",
)
ORCHARD = (
    "The orchard beside the school produced more apples this autumn than in any year since the trees were "
    "planted, and the children pressed the fruit into juice for the winter fair.",
)
LIGHTHOUSE = (
    "The lighthouse keeper counted eleven ships passing the point during the storm, and every one of them "
    "reached the harbour safely before midnight.",
)


def tiff_bomb(width: int = 200_000, height: int = 200_000) -> bytes:
    """A TIFF of a few hundred bytes whose header declares `width` × `height` pixels (a decompression bomb)."""
    import struct

    entries = [(256, 4, 1, width), (257, 4, 1, height), (258, 3, 1, 1), (259, 3, 1, 1), (262, 3, 1, 0),
               (273, 4, 1, 8), (277, 3, 1, 1), (278, 4, 1, height), (279, 4, 1, 16)]
    header = b"II*\x00" + struct.pack("<I", 24)
    strip = b"\x00" * 16
    packed = [struct.pack("<HHII", tag, kind, count, value) if kind == 4  # LONG, else SHORT padded
              else struct.pack("<HHIHH", tag, kind, count, value, 0) for tag, kind, count, value in entries]
    ifd = struct.pack("<H", len(entries)) + b"".join(packed) + struct.pack("<I", 0)
    return header + strip + ifd


def font(size: int):
    from PIL import ImageFont

    return ImageFont.load_default(size=size)


def page_image(paragraphs: Sequence[str], size: int = 26, columns: int = 1, title: str | None = None,
               page: tuple[int, int] = PAGE):
    """A white page with the paragraphs set in `columns` columns (a title across them all, if given)."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", page, "white")
    draw = ImageDraw.Draw(image)
    face = font(size)
    margin, gap, leading = 100, 60, int(size * 1.45)
    top = margin
    if title:
        _draw_line(draw, (margin, top), title, face, size)
        top += 2 * leading
    width = (page[0] - 2 * margin - gap * (columns - 1)) // columns
    chars = max(10, int(width / (size * 0.58)))
    lines: list[str] = []
    for paragraph in paragraphs:
        lines.extend(textwrap.wrap(paragraph, chars) + [""])
    per_column = -(-len(lines) // columns)
    for c in range(columns):
        x, y = margin + c * (width + gap), top
        for line in lines[c * per_column:(c + 1) * per_column]:
            _draw_line(draw, (x, y), line, face, size)
            y += leading
    return image


def _draw_line(draw, at: tuple[int, int], line: str, face, size: int) -> None:
    """Word by word with a third of an em between words, as book faces space them (the bundled face's own
    space is a narrow 0.22 em, tighter than print)."""
    x, y = at
    for word in line.split():
        draw.text((x, y), word, fill="black", font=face)
        x += int(face.getlength(word) + size / 3)


def png(image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def jpeg(image, quality: int = 85) -> bytes:
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=quality)
    return out.getvalue()


def tiff(images: Sequence) -> bytes:
    out = io.BytesIO()
    images = [image.copy() for image in images]  # a PDF or JPEG save leaves its encoder settings on an image
    images[0].save(out, format="TIFF", save_all=True, append_images=images[1:], compression="tiff_deflate")
    return out.getvalue()


def scanned_pdf(images: Sequence, dpi: float = 150.0) -> bytes:
    """A PDF of page images only (no text layer), as a scanner writes one."""
    out = io.BytesIO()
    images[0].save(out, format="PDF", save_all=True, append_images=list(images[1:]), resolution=dpi)
    return out.getvalue()


def with_text_page(pdf_bytes: bytes, text: str, at: int = 0) -> bytes:
    """`pdf_bytes` with a page of real (text-layer) text inserted at index `at`."""
    import ctypes

    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    pdf = pdfium.PdfDocument(pdf_bytes)
    page = pdf.new_page(595, 842, index=at)
    font_handle = raw.FPDFText_LoadStandardFont(pdf.raw, b"Helvetica")
    y = 780.0
    for line in textwrap.wrap(text, 80):
        obj = raw.FPDFPageObj_NewTextObj(pdf.raw, b"Helvetica", 11.0)
        encoded = (line + "\x00").encode("utf-16-le")
        buffer = ctypes.create_string_buffer(encoded)
        raw.FPDFText_SetText(obj, ctypes.cast(buffer, ctypes.POINTER(raw.FPDF_WCHAR)))
        raw.FPDFPageObj_Transform(obj, 1, 0, 0, 1, 50, y)
        raw.FPDFPage_InsertObject(page.raw, obj)
        y -= 16
    raw.FPDFPage_GenerateContent(page.raw)
    raw.FPDFFont_Close(font_handle)
    out = io.BytesIO()
    pdf.save(out)
    pdf.close()
    return out.getvalue()


def text_pdf(text: str) -> bytes:
    """A one-page PDF with `text` in its text layer (no scan, nothing for OCR to do)."""
    import pypdfium2 as pdfium

    out = io.BytesIO()
    blank = pdfium.PdfDocument.new()
    blank.new_page(595, 842)  # PDFium cannot reopen a PDF of no pages: one blank page, dropped below
    blank.save(out)
    pdf = pdfium.PdfDocument(with_text_page(out.getvalue(), text))
    pdf.del_page(1)
    out = io.BytesIO()
    pdf.save(out)
    pdf.close()
    return out.getvalue()


def words(text: str) -> list[str]:
    import re

    return re.findall(r"[a-z0-9]+", text.lower())


def word_accuracy(source: str, read: str) -> float:
    """1 - word error rate of `read` against `source` (Levenshtein over words), floored at 0."""
    a, b = words(source), words(read)
    previous = list(range(len(b) + 1))
    for i, word in enumerate(a, start=1):
        current = [i] + [0] * len(b)
        for j, other in enumerate(b, start=1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (word != other))
        previous = current
    return max(0.0, 1.0 - previous[-1] / max(len(a), 1))
