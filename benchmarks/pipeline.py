"""From a pile of real files to answers: first keyword hit, full ingest against raw encode, progress gaps.

    python benchmarks/pipeline.py [--copies 6] [--models default default-int8] [--out benchmarks/out/pipeline.json]

The pile: every file of ../shared/data/docs (PDF, DOCX, HTML), each copied
`copies` times with a byte changed where the format ignores it (a PDF
comment after %%EOF, a DOCX zip comment, an HTML comment), so each copy is a
new document to kx (content-addressed) with the same text: >= 100 files.

For each model, on a fresh KX_HOME with the model's ONNX graph already
exported (the export is a one-off, measured by `kx models prepare`):
- the ingest runs in this process, timing every progress event; a second
  process polls a keyword query (`--mode sparse`) every 50 ms and reports
  when the first hit came back, measured from the ingest's start;
- then, in this process, raw `SentenceTransformer.encode` (batch 32) of
  exactly the passages the ingest made: the physical floor under any ingest.
Figures: first keyword hit (s) against the full ingest (s); ingest
passages/s against raw encode passages/s (ratio); the largest gap between
two progress events (s); when stage 1 read its last document and when the
first embedding batch landed (earlier: the stages overlapped). The CPU and
the 1-minute load average (before the ingest, after it, after the raw
encode: the ratio is only as fair as these are alike) are printed with the
figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from common import DATA, REPO

QUERY = "learning"   # a word the papers and pages share, so the first committed group is likely to hold it

_POLLER = r"""
import os, sys, time
from engine import Engine, KxError, load_settings
start = float(sys.argv[1]); engine = Engine(load_settings())
while True:
    try:
        result = engine.query("pile", sys.argv[2], mode="sparse", k=5)
        if len(result):
            print(time.time() - start, flush=True)
            break
    except KxError:
        pass
    engine.close(); engine = Engine(load_settings())
    time.sleep(0.05)
"""


def cpu_flags() -> str:
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    found = [f for f in ("avx512_vnni", "avx512f", "avx2") if f" {f}" in flags]
    return ", ".join(found) or platform.processor() or "unknown"


def build_pile(folder: Path, copies: int) -> list[Path]:
    sources = sorted(p for p in (DATA / "docs").rglob("*") if p.is_file() and p.suffix in (".pdf", ".docx", ".html"))
    files = []
    for n in range(copies):
        for source in sources:
            target = folder / f"copy{n}" / source.name
            target.parent.mkdir(parents=True, exist_ok=True)
            data = source.read_bytes()
            if source.suffix == ".pdf":
                target.write_bytes(data + f"\n%kx-copy-{n}\n".encode())
            elif source.suffix == ".html":
                target.write_bytes(data + f"\n<!-- kx copy {n} -->\n".encode())
            else:
                with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
                    for item in src.infolist():
                        dst.writestr(item, src.read(item.filename))
                    dst.comment = f"kx copy {n}".encode()
            files.append(target)
    return files


def run_model(model: str, files: list[Path], work: Path, cache: Path) -> dict:
    from engine import Engine, load_settings
    from engine.records import Progress
    from engine.text.inputs import from_file

    home = work / f"home-{model}"
    # the poller runs under the dataset's own model setting, as a user's second `kx` would
    env = {**os.environ, "KX_HOME": str(home), "KX_MODEL_CACHE": str(cache), "PYTHONPATH": str(REPO),
           "KX_SERVE_EMBED_MODEL": model}
    settings = load_settings({"home": str(home), "model_cache": str(cache), "embed_model": model}, env={})
    engine = Engine(settings)
    engine.prepare_model()  # the one-off export, outside the timing
    docs = [from_file(p, settings.max_document_bytes) for p in files]
    events: list[float] = []
    stages: dict[str, float] = {}
    last_read = 0.0

    def on_event(event: object) -> None:
        nonlocal last_read
        now = time.perf_counter()
        if isinstance(event, Progress):
            events.append(now)
            stages.setdefault(event.stage, now)
            if event.stage == "reading":
                last_read = now

    load_before = os.getloadavg()[0]
    start_wall = time.time()
    poller = subprocess.Popen([sys.executable, "-c", _POLLER, str(start_wall), QUERY], env=env, cwd=REPO,
                              stdout=subprocess.PIPE, text=True)
    started = time.perf_counter()
    report = engine.ingest("pile", docs, on_event=on_event)
    full = time.perf_counter() - started
    load_after_ingest = os.getloadavg()[0]
    try:
        first_hit = float(poller.communicate(timeout=60)[0].strip() or "nan")
    except subprocess.TimeoutExpired:
        poller.kill()
        first_hit = float("nan")
    gaps = [b - a for a, b in zip([started] + events, events)]
    catalogue = engine.searcher("pile").catalogue
    texts = [row[1] for rows in catalogue.iter_passages_after(0, catalogue.max_passage_seq()) for row in rows]
    engine.close()

    from sentence_transformers import SentenceTransformer

    from engine.embedding.cards import resolve_model_path

    raw_model = SentenceTransformer(str(resolve_model_path("default")), device="cpu")
    raw_model.encode(texts[:32], batch_size=32)  # warm
    t = time.perf_counter()
    raw_model.encode(texts, batch_size=32)
    raw = time.perf_counter() - t
    embed_start = stages.get("embedding", started)
    loads = [round(load_before, 1), round(load_after_ingest, 1), round(os.getloadavg()[0], 1)]
    return {
        "model": model, "files": len(files), "added": report.count("added"), "refused": report.count("refused"),
        "passages": len(texts),
        "first_keyword_hit_s": round(first_hit, 2), "full_ingest_s": round(full, 1),
        "first_hit_share_of_full": round(first_hit / full, 3),
        "stage1_s": round(last_read - started, 1),
        "embedding_started_s": round(embed_start - started, 1),  # before stage1_s: the two stages overlapped
        "load_average_1min": loads,  # before the ingest, after it, after the raw encode
        "ingest_passages_per_s": round(len(texts) / full, 2), "raw_encode_passages_per_s": round(len(texts) / raw, 2),
        "ingest_vs_raw_encode": round(raw / full, 3),
        "largest_progress_gap_s": round(max(gaps), 2), "progress_events": len(events),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=6)
    parser.add_argument("--models", nargs="+", default=["default", "default-int8"])
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "out" / "pipeline.json"))
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix="kx-pipeline-") as tmp:
        work = Path(tmp)
        files = build_pile(work / "pile", args.copies)
        cache = Path(os.environ.get("KX_MODEL_CACHE") or work / "models")
        rows = [run_model(model, files, work, cache) for model in args.models]
    result = {"cpu": cpu_flags(), "cores": os.cpu_count(), "load_average": os.getloadavg(), "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
