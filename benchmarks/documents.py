"""Document extraction speed per format, the PDF library comparison, and extraction's share of ingest.

    nice -n 10 python benchmarks/documents.py [--docs ../shared/data/docs] [--rounds 5]

1. Per format (the shared PDF, DOCX and HTML files; encrypted PDFs, being
   refused, are left out): each file is extracted in-process `rounds` times;
   the median per file is summed per format and reported as files/s, MB/s
   and (PDF) pages/s.
2. pypdfium2 vs pypdf on every readable shared PDF (the same rounds, medians):
   time, characters, and two text-quality signals: compatibility ligatures
   left in the text (ﬁ, ﬂ, ... that break a search for "definition") and
   line-end hyphen breaks left ("experi-\\nence"). pypdf needs the `bench`
   extra (pypdf + cryptography).
3. Extraction's share of ingest: the good shared files are ingested into a
   fresh dataset with the real model (warmed first, so the share is not
   flattered by model loading); the same documents are then run through
   `extract_many` (the worker pool the ingest uses, cold: worker start-up
   included). Share = extraction time / ingest time, per round, median
   (target <= 10 %).

Writes benchmarks/out/documents.json.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
from pathlib import Path

from common import DATA, REPO

FORMAT_OF = {".pdf": "pdf", ".docx": "docx", ".html": "html"}


def _median_time(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def per_format(files: list[Path], rounds: int) -> dict:
    from engine.errors import KxError
    from engine.extract import extract
    from engine.text.inputs import from_file

    rows: dict[str, dict] = {}
    for path in files:
        doc = from_file(path, 2**31)
        try:
            first = extract(doc)  # warms the parser's import too
        except KxError:
            continue  # refused files (encrypted PDFs) are not throughput
        seconds = _median_time(lambda: extract(doc), rounds)
        row = rows.setdefault(FORMAT_OF[path.suffix], {"files": 0, "bytes": 0, "pages": 0, "chars": 0, "seconds": 0.0})
        row["files"] += 1
        row["bytes"] += len(doc.data)
        row["pages"] += first.page_count or 0
        row["chars"] += len(first.text)
        row["seconds"] += seconds
    for row in rows.values():
        row["mb_per_s"] = row["bytes"] / 2**20 / row["seconds"]
        row["files_per_s"] = row["files"] / row["seconds"]
        row["pages_per_s"] = row["pages"] / row["seconds"] if row["pages"] else None
    return rows


def pdf_libraries(pdfs: list[Path], rounds: int) -> dict:
    import io

    import pypdf
    import pypdfium2 as pdfium

    def with_pdfium(data: bytes) -> list[str]:
        pdf = pdfium.PdfDocument(data)
        try:
            return [pdf[i].get_textpage().get_text_bounded() for i in range(len(pdf))]
        finally:
            pdf.close()

    def with_pypdf(data: bytes) -> list[str]:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise ValueError("encrypted")
        return [page.extract_text() for page in reader.pages]

    def with_kx(data: bytes) -> list[str]:
        from engine.extract.base import Limits
        from engine.extract.pdf import extract_pdf

        extracted = extract_pdf(data, "bench", Limits())
        return [extracted.text]

    out = {}
    for name, read in (("pypdfium2 (raw)", with_pdfium), ("pypdf", with_pypdf), ("kx pdf extractor", with_kx)):
        total, chars, ligatures, breaks, pages = 0.0, 0, 0, 0, 0
        for path in pdfs:
            data = path.read_bytes()
            try:
                texts = read(data)
            except Exception:
                continue
            total += _median_time(lambda: read(data), rounds)
            text = "\n".join(texts)
            chars += len(text)
            pages += len(texts) if name != "kx pdf extractor" else 0
            ligatures += sum(0xFB00 <= ord(c) <= 0xFB06 for c in text)
            breaks += len(re.findall(r"[a-z]-\r?\n[a-z]", text)) + text.count("\x02")
        out[name] = {"seconds": total, "chars": chars, "ligatures_left": ligatures, "hyphen_breaks_left": breaks,
                     "pages": pages or None}
    return out


def ingest_share(files: list[Path], rounds: int) -> dict:
    from engine import Engine, load_settings
    from engine.embedding.cards import model_card_for
    from engine.embedding.embedders import load_embedder
    from engine.extract import extract_many
    from engine.text.inputs import from_file

    embedder = load_embedder(model_card_for("default"))
    embedder.encode(["warm up the model"] * 8)
    shares, ingests, extractions, passages = [], [], [], 0
    with tempfile.TemporaryDirectory() as home:
        for number in range(rounds):
            settings = load_settings({"home": home})
            engine = Engine(settings, embedder=embedder)
            docs = [from_file(p, settings.max_document_bytes) for p in files]
            began = time.perf_counter()
            report = engine.ingest(f"docs{number}", docs)
            ingest = time.perf_counter() - began
            began = time.perf_counter()
            outcomes = list(extract_many(docs, settings))
            extraction = time.perf_counter() - began
            passages = report.passages
            ingests.append(ingest)
            extractions.append(extraction)
            shares.append(extraction / ingest)
            assert all(not isinstance(r, Exception) for _, r in outcomes)
    return {"files": len(files), "passages": passages, "ingest_s": statistics.median(ingests),
            "extract_many_s": statistics.median(extractions), "share": statistics.median(shares),
            "shares": shares}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", default=str(DATA / "docs"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "out" / "documents.json"))
    args = parser.parse_args()
    folder = Path(args.docs)
    files = sorted(p for p in folder.rglob("*") if p.suffix in FORMAT_OF)
    pdfs = [p for p in files if p.suffix == ".pdf"]
    good = [p for p in files if "password" not in p.name]

    formats = per_format(files, args.rounds)
    print("format  files  pages      MB  files/s   pages/s    MB/s")
    for fmt, row in formats.items():
        pages = f"{row['pages_per_s']:9.0f}" if row["pages_per_s"] else "        -"
        print(f"{fmt:6s} {row['files']:6d} {row['pages']:6d} {row['bytes'] / 2**20:7.2f} {row['files_per_s']:8.1f} "
              f"{pages} {row['mb_per_s']:7.1f}")
    libraries = pdf_libraries(pdfs, args.rounds)
    print("\nPDF library       seconds   chars  ligatures left  hyphen breaks left")
    for name, row in libraries.items():
        print(f"{name:17s} {row['seconds']:7.3f} {row['chars']:7d} {row['ligatures_left']:15d} "
              f"{row['hyphen_breaks_left']:19d}")
    share = ingest_share(good, max(1, min(args.rounds, 3)))
    print(f"\ningest of {share['files']} files ({share['passages']} passages): {share['ingest_s']:.2f} s; "
          f"extract_many (pool, cold) {share['extract_many_s']:.2f} s; extraction share {share['share']:.1%} "
          f"(rounds: {', '.join(f'{s:.1%}' for s in share['shares'])})")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"formats": formats, "pdf_libraries": libraries, "ingest_share": share},
                                         indent=2))


if __name__ == "__main__":
    main()
