"""A regression check on questions kx's authors did not write: a slice of ../shared/data/qa-dev (issue 37).

The slice is qa-dev's shorter files (two PDFs and the one-table PDF, four DOCX, the four saved pages: 538
passages, 27 of the 45 questions); Walden, the thesis, the EPUBs and the Markdown tree take minutes to
embed on two cores and stay in benchmarks/qa.py. A hit succeeds as there: in the right document, its text
holding the question's phrase (case-insensitive, whitespace collapsed). The thresholds sit a little under
what this slice measured (BENCHMARKS.md, "Retrieval quality, round 4"), so a change that costs answers
fails here before it is measured on the whole set.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine import Engine, load_settings
from engine.text.folders import folder_documents

from .helpers import SHARED_DATA, needs_shared
from .qa_checks import assert_near_measured, norm, qa_figures

QA_DEV = SHARED_DATA / "qa-dev"
SLICE = ("pdf/N18-3011", "pdf/dmca", "pdf/nics-background-checks-2015-11", "docx/Docx4j_GettingStarted",
         "docx/QuickStart_guide", "docx/Think Python Glossary by Chapter", "docx/OpenSamm core",
         "html/obamawhitehouse.archives.gov--speeches", "html/clinicaltrials.gov", "html/arstechnica.com",
         "html/ma.ttias.be")
# measured on this slice (MMR on, the shipped default; Xeon AVX-512, 2026-12-05): 17 and 21 of the 27 questions
# for hybrid, 16 and 21 for sparse; 4 of the 27 answers are not in the extracted text (BENCHMARKS.md). Each
# threshold is two questions under it.
MEASURED = {"hybrid": {"success@1": 17 / 27, "success@5": 21 / 27},
            "sparse": {"success@1": 16 / 27, "success@5": 21 / 27}}


@pytest.mark.slow  # the real model embeds 538 passages (~25 s on two quiet cores)
@needs_shared("qa-dev", "questions.json")
def test_hybrid_answers_a_slice_of_qa_dev_at_least_as_well_as_keywords(tmp_path: Path, real_embedder) -> None:
    engine = Engine(load_settings({"home": str(tmp_path)}, env={}), embedder=real_embedder)
    docs = [d for d in folder_documents(QA_DEV, 10**8) if d.name in SLICE]
    assert len(docs) == len(SLICE)
    engine.ingest("dev", docs)
    keys = {name.split("/", 1)[1] for name in SLICE}
    questions = [q for q in json.loads((QA_DEV / "questions.json").read_text(encoding="utf-8")) if q["doc"] in keys]
    assert len(questions) == 27
    figures = qa_figures(engine, "dev", questions, lambda q: q["q"],
                         lambda q, h: h.document_name.split("/", 1)[1] == q["doc"] and norm(q["a"]) in norm(h.text))
    engine.close()
    assert_near_measured(figures, MEASURED, len(questions))
