"""OCR: speed and word accuracy on pages rendered from known text, at two resolutions, plus the shared scans.

    nice -n 10 python benchmarks/ocr.py [--pages 20] [--fixed-pages 6] [--threads 1]

1. Pages: `--pages` A4 pages at 150 DPI drawn with Pillow from known paragraphs
   (tests/scans.py), in four layouts that cycle (one column at 26 px, two
   columns at 22 px, small print at 16 px, large print at 34 px), each wrapped
   in a PDF with no text layer. Each page is read the way ingest reads it
   (engine/extract/ocr.read_pages: PDFium renders it at the scale its measured
   text height asks for), and then, for the first `--fixed-pages`, at a fixed
   300 DPI (scale 300/72) as a fixed-DPI pipeline would. Reported per mode:
   pages/s (wall), CPU-seconds per page (this process: ONNX Runtime's threads
   included), mean word accuracy (1 - word error rate against the source text)
   and the scale chosen.
2. The scanned pages in ../shared/data (PDF pages with an image and no text
   layer: qa-dev's WaldenFull.pdf page 1): read with the measured scale; no
   source text, so the text's start and the confidence are reported.

`--threads` is ONNX Runtime's intra-op threads (the worker default: the cores
divided among the extraction workers, 1 on 2 cores). Writes
benchmarks/out/ocr.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from common import cpu_name
from paths import BENCH_DIR, DATA, REPO

sys.path.insert(0, str(REPO))

LAYOUTS = (  # (font px, columns, paragraphs' source)
    (26, 1, "PARAGRAPHS"), (22, 2, "HARBOUR"), (16, 1, "PARAGRAPHS"), (34, 1, "HARBOUR"),
)


def _pages(count: int):
    from tests import scans

    out = []
    for index in range(count):
        size, columns, source = LAYOUTS[index % len(LAYOUTS)]
        paragraphs = getattr(scans, source)
        # rotate the paragraphs so no two pages carry the same text in the same place
        shift = index // len(LAYOUTS) % len(paragraphs)
        paragraphs = paragraphs[shift:] + paragraphs[:shift]
        title = f"Report number {index + 1}"
        image = scans.page_image(paragraphs, size=size, columns=columns, title=title)
        out.append((image, title + " " + " ".join(paragraphs), f"{size}px/{columns}col"))
    return out


def _read(pdf_bytes: bytes, fixed_scale: float | None, threads: int):
    """(text, confidence, scale, wall s, cpu s) of page 1 of `pdf_bytes`."""
    import pypdfium2 as pdfium

    from engine.extract import ocr
    from engine.extract.base import Limits

    pdf = pdfium.PdfDocument(pdf_bytes)
    page = pdf[0]
    size = page.get_size()

    def render(number: int, scale: float):
        return pdf[number - 1].render(scale=fixed_scale or scale).to_numpy()[..., :3].copy()

    wall, cpu = time.perf_counter(), time.process_time()
    if fixed_scale is None:
        read = ocr.read_pages(render, [size], [1], "bench.pdf", Limits(ocr_threads=threads, timeout=3600))[1]
    else:  # a fixed-DPI pipeline: no measuring, the page at 300 DPI straight into the models
        image = render(1, fixed_scale)
        read = ocr.page_of(ocr._recognise(image, ocr.engine(threads)), fixed_scale)
    result = (read.text, read.confidence, read.scale, time.perf_counter() - wall, time.process_time() - cpu)
    page.close()
    pdf.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--fixed-pages", type=int, default=6)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    from engine.extract import ocr
    from engine.extract.pdf import _clean_pages
    from tests import scans

    ocr.engine(args.threads)  # load the models outside the timings (once per worker in ingest)
    modes: dict[str, list[dict]] = {"measured": [], "fixed-300dpi": []}
    for index, (image, source, layout) in enumerate(_pages(args.pages)):
        pdf_bytes = scans.scanned_pdf([image])
        for mode, fixed in (("measured", None), ("fixed-300dpi", 300 / 72)):
            if mode == "fixed-300dpi" and index >= args.fixed_pages:
                continue
            text, confidence, scale, wall, cpu = _read(pdf_bytes, fixed, args.threads)
            text = _clean_pages([text])[0]
            accuracy = scans.word_accuracy(source, text)
            modes[mode].append({"page": index + 1, "layout": layout, "scale": round(scale, 3),
                                "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                                "accuracy": round(accuracy, 4), "confidence": round(confidence, 4)})
            print(f"{mode:13s} page {index + 1:2d} {layout:10s} scale {scale:.2f} {wall:6.2f} s wall "
                  f"{cpu:6.2f} s CPU  accuracy {accuracy:.3f}  confidence {confidence:.3f}", flush=True)
    summary = {}
    for mode, rows in modes.items():
        if not rows:
            continue
        summary[mode] = {
            "pages": len(rows),
            "pages_per_s": round(len(rows) / sum(r["wall_s"] for r in rows), 3),
            "cpu_s_per_page": round(statistics.mean(r["cpu_s"] for r in rows), 2),
            "word_accuracy_mean": round(statistics.mean(r["accuracy"] for r in rows), 4),
            "word_accuracy_min": min(r["accuracy"] for r in rows),
        }
    same = [m["page"] for m in modes["fixed-300dpi"]]
    measured_same = [r for r in modes["measured"] if r["page"] in same]
    if measured_same:  # the ratio on the same pages, same run: what a fixed 300 DPI costs over measuring
        summary["fixed_over_measured_cpu"] = round(sum(r["cpu_s"] for r in modes["fixed-300dpi"])
                                                   / sum(r["cpu_s"] for r in measured_same), 2)
    scanned = _shared_scans(args.threads)
    out = {"cpu": cpu_name(), "cores": os.cpu_count(), "threads": args.threads, "load": os.getloadavg(),
           "engine": ocr.version(), "summary": summary, "pages": modes, "shared_scans": scanned}
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    (BENCH_DIR / "ocr.json").write_text(json.dumps(out, indent=2))
    print(json.dumps({k: out[k] for k in ("cpu", "threads", "load", "engine", "summary", "shared_scans")}, indent=2))


def _shared_scans(threads: int) -> list[dict]:
    """Pages of the shared PDFs with an image and no text layer, read as ingest reads them."""
    import pypdfium2 as pdfium

    from engine.extract import ocr
    from engine.extract.base import Limits

    found = []
    for path in sorted(DATA.glob("*/pdf/*.pdf")) + sorted(DATA.glob("*/*/pdf/*.pdf")):
        try:
            pdf = pdfium.PdfDocument(str(path))
        except pdfium.PdfiumError:
            continue  # encrypted or damaged: not a scan
        numbers, sizes = [], []
        for index in range(min(len(pdf), 400)):
            page = pdf[index]
            sizes.append(page.get_size())
            text = page.get_textpage().get_text_bounded()
            if sum(ch.isalnum() for ch in text) < 10 and any(
                    True for _ in page.get_objects(filter=[pdfium.raw.FPDF_PAGEOBJ_IMAGE], max_depth=2)):
                numbers.append(index + 1)
            page.close()

        def render(number: int, scale: float, pdf=pdf):
            return pdf[number - 1].render(scale=scale).to_numpy()[..., :3].copy()

        for number in numbers[:3]:
            wall, cpu = time.perf_counter(), time.process_time()
            read = ocr.read_pages(render, sizes, [number], path.name, Limits(ocr_threads=threads, timeout=3600))[number]
            found.append({"file": str(path.relative_to(DATA)), "page": number, "scale": round(read.scale, 3),
                          "cpu_s": round(time.process_time() - cpu, 2), "wall_s": round(time.perf_counter() - wall, 2),
                          "confidence": round(read.confidence, 3), "lines": read.lines,
                          "text_start": " ".join(read.text.split())[:160]})
        pdf.close()
    return found


if __name__ == "__main__":
    main()
