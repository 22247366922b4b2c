"""OCR: the text of a page image, read offline with the RapidOCR models bundled in its wheel.

`rapidocr-onnxruntime` carries PP-OCRv4's text detector, its recogniser
(Chinese + English) and a 0/180-degree line classifier inside the wheel, and
runs them on ONNX Runtime: nothing is downloaded. It is imported only here,
in an extraction worker, the first time a page needs reading.

- **Scale from measured text height**: a page is first looked at small (the
  detector alone on a ~1,000-pixel view) to measure its text lines' median
  height; the page is then read at the scale that makes that height
  `TARGET_LINE_PX` (the recogniser sees 48-pixel lines: much smaller
  loses letters, much larger only costs time). No fixed DPI: a page of
  footnote-sized text is read larger than a poster.
- **Turned pages**: when most detected lines stand upright (taller than
  wide), the page is turned a quarter both ways, and when it reads with low
  confidence, half a turn; the surer reading is kept. RapidOCR's per-line
  0/180 classifier is not used: it turned sound lines upside down.
- **Reading order** (`reading_order`): columns are found as vertical gutters
  that no line crosses; lines spanning a gutter (a title over two columns)
  split the page into bands, each band read column by column, each column
  top to bottom; boxes on one baseline are one line.
- **Confidence**: the recogniser's per-line score, averaged over a page
  weighted by characters; pages under `LOW_CONFIDENCE` are kept and flagged.
"""

from __future__ import annotations

import functools
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..config import ENV
from ..errors import KxError, Status
from .base import Limits

ENGINE = "rapidocr"
MODELS = "PP-OCRv4"
TARGET_LINE_PX = 28.0     # median detected line height the page is read at (measured: BENCHMARKS.md, "OCR")
PROBE_SIDE = 1000         # the longer side of the small view text height is measured on
MAX_SIDE = 4000           # never read a page larger than this (pixels on the longer side)
MIN_SCALE_SIDE = 600      # nor smaller than this
LOW_CONFIDENCE = 0.80     # a page read with less mean confidence is flagged in the document's notes
SPACE_SHARE = 0.008       # a blank frame giving a space more than this separates two words (ctc_decode)
MIN_LINE_CONFIDENCE = 0.5  # a line read with less is noise (a smudge, a rule), as RapidOCR's own floor
MAX_IMAGE_PIXELS = 60_000_000  # an image (or a page) larger than this is refused before it is decoded


@dataclass(frozen=True)
class Line:
    """One recognised text line: its box (left, top, right, bottom) in page pixels, text and confidence."""

    left: float
    top: float
    right: float
    bottom: float
    text: str
    confidence: float

    @property
    def height(self) -> float:
        return self.bottom - self.top


@dataclass(frozen=True)
class OcrPage:
    text: str
    confidence: float  # character-weighted mean over its lines; 0.0 when nothing was read
    lines: int
    scale: float       # the factor the page was read at, relative to the image it was given


_ENGINE: Any = None


def version() -> str:
    """'rapidocr-onnxruntime 1.4.4 (PP-OCRv4)' without importing the package (kx info stays light)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return (f"rapidocr-onnxruntime {installed('rapidocr-onnxruntime')} ({MODELS} detection + recognition, "
                "bundled in the wheel)")
    except PackageNotFoundError:
        return "not installed (pip install rapidocr-onnxruntime)"


def ocr_id() -> str:
    """What goes into a document's extractor id: the OCR engine and its models, so a newer one shows."""
    from importlib.metadata import version as installed

    return f"ocr/{ENGINE}-{installed('rapidocr-onnxruntime')}/{MODELS}"


def engine(threads: int = 1) -> Any:
    """The RapidOCR pipeline, made once per worker process (~0.4 s: three ONNX sessions)."""
    global _ENGINE
    if _ENGINE is None:
        from rapidocr_onnxruntime import RapidOCR

        # max_side_len: we choose the scale ourselves (and cap it at MAX_SIDE), RapidOCR must not shrink it again
        _ENGINE = RapidOCR(intra_op_num_threads=threads, inter_op_num_threads=1, max_side_len=MAX_SIDE + 64,
                           print_verbose=False)
    return _ENGINE


def read_pages(render: Callable[[int, float], Any], sizes: Sequence[tuple[float, float]], numbers: Sequence[int],
               label: str, limits: Limits) -> dict[int, OcrPage]:
    """OCR the pages `numbers` (1-based) of a document: `render(number, scale)` gives page `number` as a BGR array
    at `scale` times `sizes[number - 1]` (its width and height in pixels at scale 1).

    Reports "OCR page i/n" as it goes, and refuses the document (RESOURCE_EXHAUSTED) as soon as the pages read
    so far show the rest cannot be read before the job's deadline (`Limits.timeout`): a 500-page scan is
    refused after its first page, not after the whole timeout.
    """
    from .base import report

    started = time.monotonic()
    pages: dict[int, OcrPage] = {}
    for done, number in enumerate(numbers):
        report(f"reading {_short(label)}: OCR page {done + 1}/{len(numbers)}", done, len(numbers))
        width, height = sizes[number - 1]
        pages[number] = read_page(functools.partial(render, number), width, height, limits.ocr_threads)
        spent = time.monotonic() - started
        left = len(numbers) - done - 1
        if left and spent + spent / (done + 1) * left > 0.9 * limits.timeout:
            raise KxError(Status.RESOURCE_EXHAUSTED, (
                f"{label} was refused: it has {len(numbers):,} scanned page{'s' * (len(numbers) != 1)} to read by "
                f"OCR and the first {done + 1} took {spent:.1f} s, so all of them would take about "
                f"{spent / (done + 1) * len(numbers):.0f} s, over the {limits.timeout:g}-s limit "
                f"({ENV.extract_timeout}); "
                "raise the limit, split the file, or set ocr = off to skip scans"))
    return pages


def read_page(render: Callable[[float], Any], width: float, height: float, threads: int = 1) -> OcrPage:
    """The text of one page: `render(scale)` gives it as a BGR uint8 array; read at the scale its measured text
    height asks for, and turned when it reads better turned."""
    import numpy as np

    ocr = engine(threads)
    probe = min(1.0, PROBE_SIDE / max(width, height))
    measured = line_height(render(probe), ocr)
    if measured is None and probe < 1.0:  # text too small to see on the small view: look at it full size
        probe = min(1.0, MAX_SIDE / max(width, height))
        measured = line_height(render(probe), ocr)
    if measured is None:
        return OcrPage("", 0.0, 0, probe)
    scale = chosen_scale(width, height, measured / probe)
    image = render(scale)
    lines = _recognise(image, ocr)
    # a page scanned sideways (its lines stand upright) or upside down (read with little confidence): read it
    # turned, and keep the surer reading
    turns = (1, 3) if _mostly_upright(lines) else (2,) if _confidence(lines) < LOW_CONFIDENCE else ()
    for k in turns:
        turned = _recognise(np.ascontiguousarray(np.rot90(image, k)), ocr)
        if _score(turned) > _score(lines):
            lines = turned
    return page_of(lines, scale)


def _short(label: str) -> str:
    return label.replace("\\", "/").rsplit("/", 1)[-1]


def page_of(lines: list[Line], scale: float) -> OcrPage:
    return OcrPage(reading_order(lines), _confidence(lines), len(lines), scale)


def mean_confidence(pages: list[OcrPage]) -> float:
    """The pages' confidence, weighted by how much text each holds."""
    weights = [max(len(p.text), 1) if p.text else 0 for p in pages]
    total = sum(weights)
    return sum(p.confidence * w for p, w in zip(pages, weights)) / total if total else 0.0


def low_confidence_notes(label: str, pages: dict[int, OcrPage]) -> tuple[str, ...]:
    """A note naming the OCR'd pages read with less than LOW_CONFIDENCE (kept, but worth checking)."""
    low = sorted(n for n, p in pages.items() if p.text and p.confidence < LOW_CONFIDENCE)
    if not low:
        return ()
    shown = ", ".join(f"{n} ({pages[n].confidence:.2f})" for n in low[:10]) + (", ..." if len(low) > 10 else "")
    return (f"{label}: OCR read page{'s' * (len(low) > 1)} {shown} with low confidence (under "
            f"{LOW_CONFIDENCE:.2f}); their text may hold misread words",)


def line_height(image: Any, ocr: Any) -> float | None:
    """The median height in pixels of the text lines the detector finds on `image`; None when it finds none."""
    boxes, _ = ocr.text_det(image)
    if boxes is None or len(boxes) == 0:
        return None
    return statistics.median(min(_edge(b[0], b[3]), _edge(b[1], b[2])) for b in boxes)


def chosen_scale(width: float, height: float, line_px: float) -> float:
    """The factor that brings the median line to TARGET_LINE_PX, kept within MIN_SCALE_SIDE..MAX_SIDE."""
    scale = TARGET_LINE_PX / max(line_px, 1.0)
    longest = max(width, height)
    return min(max(scale, MIN_SCALE_SIDE / longest), MAX_SIDE / longest)


def resized(rgb: Any, scale: float) -> Any:
    if abs(scale - 1.0) < 0.02:
        return rgb
    import cv2

    h, w = rgb.shape[:2]
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return cv2.resize(rgb, size, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC)


def _edge(a: Sequence[float], b: Sequence[float]) -> float:
    return float(((a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2) ** 0.5)


def _recognise(image: Any, ocr: Any) -> list[Line]:
    """Detect the lines, turn upside-down ones (the classifier), and recognise them (our own CTC decoding)."""
    boxes, _ = ocr.text_det(image)
    if boxes is None or len(boxes) == 0:
        return []
    boxes = ocr.sorted_boxes(boxes)
    crops = ocr.get_crop_img_list(image, boxes)  # no per-line 0/180 classifier: it flipped sound lines (measured)
    lines = []
    for box, (text, confidence) in zip(boxes, _read_lines(crops, ocr.text_rec)):
        if text.strip() and confidence >= MIN_LINE_CONFIDENCE:
            xs, ys = [p[0] for p in box], [p[1] for p in box]
            lines.append(Line(float(min(xs)), float(min(ys)), float(max(xs)), float(max(ys)), text, confidence))
    return lines


def _read_lines(crops: list, rec: Any, batch: int = 6) -> list[tuple[str, float]]:
    """Each line crop's text and confidence, batched by width as RapidOCR batches them."""
    import numpy as np

    order = sorted(range(len(crops)), key=lambda i: crops[i].shape[1] / max(crops[i].shape[0], 1))
    out: list[tuple[str, float]] = [("", 0.0)] * len(crops)
    height, width = rec.rec_image_shape[1:3]
    for start in range(0, len(order), batch):
        chunk = order[start:start + batch]
        ratio = max([width / height] + [crops[i].shape[1] / max(crops[i].shape[0], 1) for i in chunk])
        images = np.concatenate([rec.resize_norm_img(crops[i], ratio)[np.newaxis] for i in chunk]).astype(np.float32)
        for i, probs in zip(chunk, rec.session(images)[0]):
            out[i] = ctc_decode(probs, rec.postprocess_op.character)
    return out


def ctc_decode(probs: Any, alphabet: list[str]) -> tuple[str, float]:
    """Greedy CTC decoding that keeps the spaces the recogniser hesitates over.

    PP-OCRv4's Chinese+English recogniser often lets the blank outvote the space between English words
    ("oldlibrarytodiscuss"), yet the space keeps a clear share of the probability there (0.05-0.4,
    measured) while inside a word it has next to none: so a space goes in between two characters
    whenever a frame between them gives it more than SPACE_SHARE.
    """
    best = probs.argmax(axis=1)
    space = len(alphabet) - 1 if alphabet[-1] == " " else alphabet.index(" ")
    chars: list[str] = []
    scores: list[float] = []
    previous, gap_space = 0, 0.0
    for t, index in enumerate(best.tolist()):
        if index == 0:  # the CTC blank
            gap_space = max(gap_space, float(probs[t, space]))
        elif index != previous:
            if gap_space > SPACE_SHARE and chars and chars[-1] != " " and alphabet[index] != " ":
                chars.append(" ")
            chars.append(alphabet[index])
            scores.append(float(probs[t, index]))
            gap_space = 0.0
        previous = index
    text = "".join(chars).strip()
    return text, (sum(scores) / len(scores) if scores else 0.0)


def _mostly_upright(lines: list[Line]) -> bool:
    tall = sum(1 for line in lines if line.height > 1.5 * (line.right - line.left))
    return bool(lines) and tall > len(lines) / 2


def _confidence(lines: list[Line]) -> float:
    chars = sum(len(line.text) for line in lines)
    return sum(line.confidence * len(line.text) for line in lines) / chars if chars else 0.0


def _score(lines: list[Line]) -> float:
    return sum(line.confidence * len(line.text) for line in lines)


def reading_order(lines: list[Line]) -> str:
    """The lines as text in reading order: columns left to right, each top to bottom; paragraphs (a gap
    taller than a line) and columns end with a blank line; hyphens that end a line are kept (marked
    U+0002 so the PDF reader's join decides whether it was a word break)."""
    if not lines:
        return ""
    unit = statistics.median(line.height for line in lines)
    blocks = _blocks(lines, unit)
    return "\n\n".join(b for b in (_block_text(block, unit) for block in blocks) if b)


def _blocks(lines: list[Line], unit: float) -> list[list[Line]]:
    """Groups of lines read one after another: a single column, or (recursively) a page's columns."""
    gutter = _gutter(lines, unit)
    if gutter is None:
        return [lines]
    lo, hi = gutter
    spanning = [line for line in lines if line.left < hi and line.right > lo]
    blocks: list[list[Line]] = []
    rest = sorted((line for line in lines if line not in spanning), key=lambda line: line.top)
    for span in sorted(spanning, key=lambda line: line.top):
        above = [line for line in rest if line.top < span.top]
        rest = [line for line in rest if line.top >= span.top]
        blocks.extend(_columns(above, lo, hi, unit))
        blocks.append([span])
    blocks.extend(_columns(rest, lo, hi, unit))
    return [b for b in blocks if b]


def _columns(lines: list[Line], lo: float, hi: float, unit: float) -> list[list[Line]]:
    left = [line for line in lines if line.right <= lo]
    right = [line for line in lines if line.left >= hi]
    return [*(_blocks(left, unit) if left else []), *(_blocks(right, unit) if right else [])]


def _gutter(lines: list[Line], unit: float) -> tuple[float, float] | None:
    """The widest vertical strip (at least a line's height wide) that at most a few lines cross and that has
    at least two lines on each side; None for a single column."""
    if len(lines) < 4:
        return None
    edges = sorted({round(v) for line in lines for v in (line.left, line.right)})
    allowed = max(1, len(lines) // 10)  # a title or two may cross it
    best: tuple[float, float] | None = None
    for a, b in zip(edges, edges[1:]):
        if b - a < unit or (best is not None and b - a <= best[1] - best[0]):
            continue
        crossing = sum(1 for line in lines if line.left < b and line.right > a)
        left = sum(1 for line in lines if line.right <= a)
        right = sum(1 for line in lines if line.left >= b)
        if crossing <= allowed and left >= 2 and right >= 2:
            best = (a, b)
    return best


def _block_text(lines: list[Line], unit: float) -> str:
    rows: list[list[Line]] = []
    for line in sorted(lines, key=lambda line: (line.top + line.bottom) / 2):
        middle = (line.top + line.bottom) / 2
        if rows and abs(middle - _middle(rows[-1])) < 0.5 * unit:
            rows[-1].append(line)
        else:
            rows.append([line])
    out: list[str] = []
    previous_bottom: float | None = None
    for row in rows:
        top = min(line.top for line in row)
        if previous_bottom is not None:
            out.append("\n\n" if top - previous_bottom > unit else "\n")
        out.append(" ".join(line.text.strip() for line in sorted(row, key=lambda line: line.left)))
        previous_bottom = max(line.bottom for line in row)
    return _mark_breaks("".join(out))


def _middle(row: list[Line]) -> float:
    return sum((line.top + line.bottom) / 2 for line in row) / len(row)


def _mark_breaks(text: str) -> str:
    import re

    return re.sub(r"(?<=\w)-\n(?=\w)", "\x02\n", text)
