"""Querying end to end: the real `kx datasets query` CLI over the real bundled model.

One small corpus is ingested once per module into its own home and every
command names that home with `--home`; tests that only read share it. The
texts are chosen so each retriever has something only it can answer:

* money-back: a paraphrase target. "what is the refund window?" shares no content
  word with it, nor with its name (a document's name is a keyword field of its own),
  while the windows note shares the word "window" and nothing else.
* asset-tags: mentions KX-4021 once in otherwise generic text; security-keys and
  token-desk talk about hardware tokens with the look-alike codes KX-4012,
  KX-4020 and KX-4201, so they are what the model finds closest to "KX-4021".
* vacation-a/b/c: one paragraph three times with trivial edits, plus other
  leave documents that answer the same question less directly (for MMR).
* travel-policy: a long document cut into several passages (provenance).

A second dataset, `pool`, has more passages than a retriever's candidate pool
(KX_CANDIDATE_POOL, at least 100), so a passage can be in the sparse list and
not in the dense one.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from engine import Engine, Status, load_settings
from engine.errors import KxError

from .helpers import CliResult, kx_process, run_cli

pytestmark = pytest.mark.slow

VACATION = ("To request vacation time off, submit the leave form in the HR portal at least two weeks "
            "before your first day away.")

DOCS = {
    "money-back": "Customers receive their money back within 30 days of purchase.",
    "windows": "Please close the office window before you leave in the evening.",
    "asset-tags": ("Every laptop is delivered with a small sticker on its lid. The sticker shows asset tag KX-4021 "
                   "next to the serial number, and the facilities team keeps the list of stickers."),
    "security-keys": "The KX-4012 hardware security token must be registered before VPN sign-in.",
    "token-desk": "KX-4020 and KX-4201 USB tokens are issued by the IT hardware desk.",
    "vacation-a": VACATION,
    "vacation-b": VACATION.replace("two weeks", "2 weeks"),
    "vacation-c": VACATION.replace("HR portal", "HR web portal"),
    "holidays": ("Public holidays and the winter closure are listed in the company calendar; your manager "
                 "approves any vacation on top of them."),
    "sick-leave": "Sick leave needs no approval in advance: tell your manager on the morning you fall ill.",
    "parking": "The parking garage opens at seven and closes at ten in the evening.",
}

TRAVEL = """# Travel and expenses

Book trains and flights through the travel desk at least ten working days before you leave. Economy class is the
rule for journeys under six hours; for longer flights a premium economy seat may be booked with a director's
approval. Hotels should be within walking distance of the office you visit and cost no more than the city cap
published on the intranet.

## Meals and subsistence

While travelling you may claim breakfast, lunch and dinner up to the daily allowance for the country you are in.
Alcohol is never reimbursed. Keep every receipt: a photo taken with your phone is enough, as long as the
merchant, the date and the amount can be read. Client dinners are booked by the account lead and paid with the
team card, not claimed personally.

## Private cars and mileage

If you drive your own car on company business, claim the mileage rate of 0.30 per kilometre, measured from the
office rather than from your home. Parking fees and tolls are claimed at cost with a receipt. Fines for speeding
or parking are your own responsibility and are never paid by the company. Car sharing between colleagues
travelling to the same site is encouraged, and only the driver claims mileage.

## Submitting a claim

Claims are submitted in the expenses tool within sixty days of the trip, with receipts attached, and approved by
your line manager. Approved claims are paid with the next monthly salary. Claims older than sixty days are paid
only with the finance director's written approval, so submit them promptly after you return.
"""

# The pool dataset: many passages the model finds close to the question but
# which share none of its words, one passage both retrievers like, and one
# that shares only a rare word with the question.
POOL_QUESTION = "How many vacation days do new employees earn in their first year at Zorblax?"
POOL_BOTH = "Employees earn twenty-five vacation days each year."
POOL_SPARSE_ONLY = ("The blue delivery van parked behind the Zorblax warehouse is washed every Friday by the garage "
                    "crew, who also check its tyres and oil.")
POOL_FILLER = "Recruits at site {i} get {w} weeks of paid holiday in the initial twelve months."


@dataclass(frozen=True)
class Corpus:
    home: Path
    files: dict[str, Path]

    def text_of(self, name: str) -> str:
        return self.files[name].read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> Corpus:
    """The corpus and pool datasets, ingested once into a home of their own."""
    home = tmp_path_factory.mktemp("kx-query-home")
    folder = tmp_path_factory.mktemp("kx-query-docs")
    files = {}
    for name, text in {**DOCS, "travel-policy": TRAVEL}.items():
        files[name] = folder / f"{name}.md"
        files[name].write_text(text, encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:  # runs before the per-test fixture clears KX_*
        for key in list(os.environ):
            if key.startswith("KX_"):
                mp.delenv(key)
        mp.setenv("KX_MODEL_CACHE", str(model_cache))  # the session's export cache, as the tests' queries use
        result = run_cli("--home", str(home), "datasets", "ingest", "corpus",
                         *[a for f in files.values() for a in ("--file", str(f))], "--json")
        assert result.code == 0, result.stderr
        report = json.loads(result.stdout)
        assert report["added"] == len(files) and report["passages"] > len(files)  # travel-policy is several

        pool = [POOL_BOTH, POOL_SPARSE_ONLY] + [POOL_FILLER.format(i=i, w=2 + i % 5) for i in range(110)]
        result = run_cli("--home", str(home), "datasets", "ingest", "pool",
                         *[a for t in pool for a in ("--text", t)], "--json")
        assert result.code == 0, result.stderr
    return Corpus(home, files)


def kx(corpus: Corpus, *args: str) -> CliResult:
    """`kx --home HOME ARGS` in this process."""
    result = run_cli("--home", str(corpus.home), *args)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def ask(corpus: Corpus, text: str, *args: str, dataset: str = "corpus") -> dict:
    """`kx datasets query DATASET --text TEXT ARGS --json`, which must succeed."""
    result = kx(corpus, "datasets", "query", dataset, "--text", text, *args, "--json")
    assert result.code == 0, result.stderr
    assert result.stderr == ""
    return json.loads(result.stdout)


def extra_terms(hit: dict) -> float:
    """A hybrid hit's RRF share from the third list (the fused head ranked by best sentence), 0 outside it,
    and from the lead vote (sparse's best by a wide BM25 margin, engine/ranking.py LEAD_RATIO), 0 without it."""
    sentence = 0.0 if hit["sentence_rank"] is None else 1 / (60 + hit["sentence_rank"])
    return sentence + (0.0 if hit["lead_ratio"] is None else 1 / 61)


def names(answer: dict) -> list[str]:
    return [hit["document_name"] for hit in answer["hits"]]


def assert_one_line_error(result: CliResult, status: Status) -> str:
    assert result.code == status.exit_code, (result.code, result.stderr)
    assert result.stderr.startswith(f"error: {status.name}: ")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stdout == ""
    return result.stderr.strip()


# -- what each retriever is for -------------------------------------------------------------------


def test_a_paraphrase_is_found_first_by_dense_and_not_by_sparse(corpus: Corpus) -> None:
    query = "what is the refund window?"
    dense = ask(corpus, query, "--mode", "dense", "--rerank", "off")
    assert dense["mode"] == "dense"
    assert names(dense)[0] == "money-back"
    assert dense["hits"][0]["dense_score"] > dense["hits"][1]["dense_score"] + 0.1  # not a near tie

    sparse = ask(corpus, query, "--mode", "sparse", "--rerank", "off")
    assert sparse["mode"] == "sparse"
    # BM25 sees only the shared word: the note about the office window, and never the refund policy
    assert names(sparse) == ["windows"]
    assert all(hit["dense_rank"] is None for hit in sparse["hits"])


def test_an_exact_code_is_found_first_by_sparse_and_not_by_dense(corpus: Corpus) -> None:
    sparse = ask(corpus, "KX-4021", "--mode", "sparse", "--rerank", "off")
    assert names(sparse)[0] == "asset-tags"
    assert sparse["hits"][0]["sparse_score"] > sparse["hits"][1]["sparse_score"]

    dense = ask(corpus, "KX-4021", "--mode", "dense", "--rerank", "off")
    # the model reads codes as look-alikes: a token desk handing out KX-4020/KX-4201 is "closer"
    assert names(dense)[0] != "asset-tags"
    assert names(dense)[0] in {"token-desk", "security-keys"}


def test_hybrid_ranks_a_passage_both_retrievers_liked_above_one_only_dense_liked(corpus: Corpus) -> None:
    answer = ask(corpus, "what is the refund window?", "--rerank", "off")
    assert answer["mode"] == "hybrid" and answer["rerank"] is False
    hits = answer["hits"]
    top, runner_up = hits[0], hits[1]
    # the office-window note: dense liked it a little (not first), sparse liked it best
    assert top["document_name"] == "windows"
    assert top["dense_rank"] > 1 and top["sparse_rank"] == 1
    # dense's own first choice is in one list only, and comes second
    assert runner_up["document_name"] == "money-back"
    assert (runner_up["dense_rank"], runner_up["sparse_rank"]) == (1, None)

    both = [h for h in hits if h["dense_rank"] is not None and h["sparse_rank"] is not None]
    one = [h for h in hits if (h["dense_rank"] is None) != (h["sparse_rank"] is None)]
    assert both and one and len(both) + len(one) == len(hits)
    assert max(h["rank"] for h in both) < min(h["rank"] for h in one)
    for hit in hits:
        # RRF over dense, sparse and hybrid's third list (the fused head by best sentence)
        expected = sum(1 / (60 + r) for r in (hit["dense_rank"], hit["sparse_rank"], hit["sentence_rank"])
                       if r is not None) + (1 / 61 if hit["lead_ratio"] is not None else 0.0)
        assert hit["fused_score"] == pytest.approx(expected, abs=1e-9)
        assert hit["score"] == hit["fused_score"]  # hybrid's relevance is the fused score
        assert hit["fused_rank"] == hit["rank"] and hit["mmr_moved"] == 0


def test_hybrid_ranks_a_passage_both_liked_above_one_only_sparse_liked(corpus: Corpus) -> None:
    """With more passages than the candidate pool, a passage can miss the dense list entirely."""
    answer = ask(corpus, POOL_QUESTION, "--rerank", "off", "--k", "64", dataset="pool")
    hits = {h["text"]: h for h in answer["hits"]}
    both, sparse_only = hits[POOL_BOTH], hits[POOL_SPARSE_ONLY]
    assert both["rank"] == 1 and both["dense_rank"] == 1 and both["sparse_rank"] is not None
    # "Zorblax" is the rarest word of the question, so BM25 ranks the van first or second ...
    assert sparse_only["sparse_rank"] <= 2
    # ... while the model ranks it below a hundred leave notes: it is not in the dense pool at all
    assert sparse_only["dense_rank"] is None and sparse_only["dense_score"] is None
    expected = extra_terms(sparse_only) + 1 / (60 + sparse_only["sparse_rank"])
    assert sparse_only["fused_score"] == pytest.approx(expected, abs=1e-9)
    assert both["fused_score"] == pytest.approx(extra_terms(both) + 1 / 61 + 1 / (60 + both["sparse_rank"]),
                                                abs=1e-9)
    assert both["rank"] < sparse_only["rank"]
    dense_only = [h for h in answer["hits"] if h["sparse_rank"] is None]
    assert dense_only and all(both["rank"] < h["rank"] for h in dense_only)


# -- MMR ----------------------------------------------------------------------------------------


def test_mmr_keeps_near_duplicates_from_filling_the_top(corpus: Corpus) -> None:
    query = "How do I ask for vacation time off?"
    duplicates = {"vacation-a", "vacation-b", "vacation-c"}

    plain = ask(corpus, query, "--rerank", "off", "--k", "20")  # 20: every passage of the corpus
    assert plain["rerank"] is False
    assert set(names(plain)[:3]) == duplicates
    assert all(hit["mmr_moved"] == 0 and hit["fused_rank"] == hit["rank"] for hit in plain["hits"])

    diverse = ask(corpus, query, "--k", "20")  # default: KX_RERANK on, KX_MMR_LAMBDA 0.7
    assert diverse["rerank"] is True
    assert not set(names(diverse)[:3]) <= duplicates
    assert names(diverse)[0] == names(plain)[0]  # the first pick is the most relevant one
    assert any(hit["mmr_moved"] != 0 for hit in diverse["hits"])
    for hit in diverse["hits"]:
        assert hit["mmr_moved"] == hit["fused_rank"] - hit["rank"]
    # MMR only reorders: with k covering the corpus, the same passages come back
    assert sorted(h["passage_ref"] for h in diverse["hits"]) == sorted(h["passage_ref"] for h in plain["hits"])


# -- k ------------------------------------------------------------------------------------------


def test_k_above_the_maximum_is_clamped_with_a_note(corpus: Corpus, monkeypatch: pytest.MonkeyPatch) -> None:
    answer = ask(corpus, "vacation", "--k", "100", dataset="pool")
    assert (answer["k"], answer["requested_k"], answer["clamped"]) == (64, 100, True)
    assert len(answer["hits"]) == 64
    assert any("KX_MAX_K" in note and "100" in note and "64" in note for note in answer["notes"])

    human = kx(corpus, "datasets", "query", "pool", "--text", "vacation", "--k", "100")
    assert human.code == 0, human.stderr
    assert any(line.startswith("note: k clamped from 100 to 64") for line in human.stdout.splitlines())

    monkeypatch.setenv("KX_MAX_K", "2")
    small = ask(corpus, "vacation")
    assert (small["k"], small["requested_k"], small["clamped"]) == (2, 10, True)
    assert len(small["hits"]) == 2

    unclamped = ask(corpus, "vacation", "--k", "1")
    assert unclamped["clamped"] is False and unclamped["notes"] == [] and len(unclamped["hits"]) == 1


@pytest.mark.parametrize("k", ["0", "-3"])
def test_k_below_one_is_refused(corpus: Corpus, k: str) -> None:
    result = kx(corpus, "datasets", "query", "corpus", "--text", "vacation", "--k", k)
    assert "k must be a whole number of at least 1" in assert_one_line_error(result, Status.INVALID_ARGUMENT)


# -- errors and odd queries ---------------------------------------------------------------------


def test_an_unknown_dataset_is_not_found_and_the_existing_ones_are_named(corpus: Corpus) -> None:
    result = kx(corpus, "datasets", "query", "nope", "--text", "vacation")
    message = assert_one_line_error(result, Status.NOT_FOUND)
    assert "dataset 'nope' does not exist (datasets: corpus, pool)" in message


def test_an_empty_query_is_refused(corpus: Corpus) -> None:
    result = kx(corpus, "datasets", "query", "corpus", "--text", "  ")
    assert "the query is empty" in assert_one_line_error(result, Status.INVALID_ARGUMENT)


def test_without_a_model_dense_and_hybrid_are_refused_but_sparse_works(
        corpus: Corpus, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KX_SERVE_EMBED_MODEL", "none")
    for mode in ("dense", "hybrid"):
        result = kx(corpus, "datasets", "query", "corpus", "--text", "KX-4021", "--mode", mode)
        message = assert_one_line_error(result, Status.FAILED_PRECONDITION)
        assert f"{mode} search needs an embedding model" in message and "KX_SERVE_EMBED_MODEL" in message
    answer = ask(corpus, "KX-4021", "--mode", "sparse")
    assert answer["mode"] == "sparse"
    assert names(answer)[0] == "asset-tags"
    assert all(hit["dense_rank"] is None for hit in answer["hits"])


def test_a_100000_character_query_is_answered(corpus: Corpus) -> None:
    words = " ".join(f"word{i}" for i in range(20_000))
    text = ("what is the refund window? " + words)[:100_000]
    assert len(text) == 100_000
    answer = ask(corpus, text)
    assert answer["mode"] == "hybrid" and answer["hits"]
    assert answer["query"] == text


def test_words_past_the_sparse_term_cap_are_not_silently_dropped(corpus: Corpus) -> None:
    text = " ".join(f"word{i}" for i in range(600)) + " what is the refund window?"
    answer = ask(corpus, text, "--mode", "sparse")
    assert names(answer) == ["windows"]
    assert not any("no query word" in note for note in answer["notes"])


@pytest.mark.parametrize("text", ["?!...", "the of and"])
def test_a_query_of_no_searchable_words_leaves_the_sparse_list_empty_and_says_so(corpus: Corpus, text: str) -> None:
    answer = ask(corpus, text)
    assert answer["mode"] == "hybrid"
    assert answer["hits"]  # dense still answers
    assert all(hit["sparse_rank"] is None and hit["sparse_score"] is None for hit in answer["hits"])
    assert any("no query word is in the sparse index" in note for note in answer["notes"])

    sparse = ask(corpus, text, "--mode", "sparse")
    assert sparse["hits"] == []
    assert any("no query word is in the sparse index" in note for note in sparse["notes"])
    human = kx(corpus, "datasets", "query", "corpus", "--text", text, "--mode", "sparse")
    assert human.code == 0 and human.stderr == ""
    assert "note: no query word is in the sparse index" in human.stdout
    assert "No passage matches." in human.stdout


# -- the fingerprint and pre-computed vectors -----------------------------------------------------


@pytest.mark.parametrize("mode", ["hybrid", "dense", "sparse"])
def test_a_changed_chunk_size_refuses_the_query_like_ingest_does(
        corpus: Corpus, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    monkeypatch.setenv("KX_CHUNK_SIZE", "800")
    result = kx(corpus, "datasets", "query", "corpus", "--text", "vacation", "--mode", mode)
    assert assert_one_line_error(result, Status.FAILED_PRECONDITION) == (
        "error: FAILED_PRECONDITION: dataset 'corpus' was built under other index settings (chunk_size: 1000 -> "
        "800); this command set chunk_size (env KX_CHUNK_SIZE). To use the dataset's own, drop those settings, or "
        "override them for one command: kx --set chunk_size=1000 datasets query corpus \"your question\" (the same "
        "--set works before any kx command). To build a copy under the new settings: kx datasets rebuild corpus "
        "--as NEW_NAME --set chunk_size=800"
    )


def test_a_precomputed_query_vector_must_match_the_dataset_and_then_equals_the_text_query(
        corpus: Corpus, real_embedder) -> None:
    engine = Engine(load_settings({"home": str(corpus.home)}), embedder=real_embedder)
    try:
        with pytest.raises(KxError) as wrong:
            engine.query("corpus", vector=np.ones(10, dtype=np.float32))
        assert wrong.value.status is Status.INVALID_ARGUMENT
        assert "10 dimensions" in wrong.value.message and "384-dimensional" in wrong.value.message

        text = "what is the refund window?"
        vector = real_embedder.encode([text])[0]
        assert vector.shape == (384,)
        for rerank in (False, True):
            by_text = engine.query("corpus", text, mode="dense", rerank=rerank)
            by_vector = engine.query("corpus", vector=vector, rerank=rerank)  # no text: dense only
            assert by_vector.mode == "dense" and "no query text: searched dense only" in by_vector.notes
            # the same hits; only the text query has words to find its answering sentence by
            assert all(h.answer_span is None for h in by_vector.hits)
            assert all(h.answer_span is not None for h in by_text.hits)
            assert ([h.to_dict() for h in by_vector.hits]
                    == [{**h.to_dict(), "answer_span": None} for h in by_text.hits])
            assert by_vector.hits[0].document_name == "money-back"
            # and the CLI, with a model of its own, agrees
            cli = ask(corpus, text, "--mode", "dense", "--rerank", "on" if rerank else "off")
            assert cli["hits"] == [h.to_dict() for h in by_text.hits]
        # given with its words, the vector answers as the words alone do, in every mode: the sentences (the
        # hybrid sentence list, the answer spans) are scored with the model's word vectors either way
        for words in (text, "how long before my vacation do I submit the leave form?", "KX-4021"):
            vector = real_embedder.encode([words])[0]
            for mode in ("hybrid", "dense", "sparse"):
                by_text = engine.query("corpus", words, mode=mode)
                both = engine.query("corpus", words, vector=vector, mode=mode)
                assert [h.to_dict() for h in both.hits] == [h.to_dict() for h in by_text.hits], (words, mode)
                assert any(h.sentence_rank for h in both.hits) or mode != "hybrid" or len(both.hits) < 2
    finally:
        engine.close()


# -- what a hit carries ---------------------------------------------------------------------------

HIT_FIELDS = {
    "rank", "score", "text", "passage_ref", "document_ref", "document_name", "chunk", "chunk_index", "chunk_count",
    "char_start", "char_end", "dense_rank", "dense_score", "sparse_rank", "sparse_score", "fused_score",
    "fused_rank", "mmr_moved", "duplicate_of", "page_start", "page_end", "section", "document_title",
    "source_path", "answer_span", "version", "superseded_by", "sentence_rank", "sentence_score", "lead_ratio",
    "ocr", "ocr_confidence",
}


def test_a_hit_carries_its_provenance_and_its_place_in_each_list(corpus: Corpus) -> None:
    answer = ask(corpus, "mileage rate for driving my own car", "--k", "20")
    assert answer["hits"]
    for hit in answer["hits"]:
        assert set(hit) == HIT_FIELDS
        assert hit["ocr"] is False and hit["ocr_confidence"] is None  # Markdown files: nothing was OCR'd
        assert hit["chunk"] == f"[chunk {hit['chunk_index'] + 1}/{hit['chunk_count']}]"
        assert len(hit["passage_ref"]) == len(hit["document_ref"]) == 64
        original = corpus.text_of(hit["document_name"])
        assert original[hit["char_start"]:hit["char_end"]] == hit["text"]
    assert [h["rank"] for h in answer["hits"]] == list(range(1, len(answer["hits"]) + 1))

    top = answer["hits"][0]
    assert top["document_name"] == "travel-policy" and top["chunk_count"] > 1
    assert "0.30 per kilometre" in top["text"]
    assert top["dense_rank"] is not None and top["sparse_rank"] is not None
    travel = [h for h in answer["hits"] if h["document_name"] == "travel-policy"]
    assert len({h["chunk_index"] for h in travel}) == len(travel) == top["chunk_count"]  # every passage, once


def test_human_output_shows_chunk_document_and_list_ranks(corpus: Corpus) -> None:
    result = kx(corpus, "datasets", "query", "corpus", "--text", "mileage rate for driving my own car")
    assert result.code == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0].startswith("corpus · hybrid · MMR on · k=10 · 10 hit(s) · ")
    first = next(line for line in lines if line.lstrip().startswith("1 "))
    assert "travel-policy" in first and "[chunk " in first
    assert "dense #" in first and "sparse #" in first
    assert "sparse —" in result.stdout  # a passage sparse did not find at all

    sparse = kx(corpus, "datasets", "query", "corpus", "--text", "KX-4021", "--mode", "sparse")
    assert sparse.code == 0
    first = next(line for line in sparse.stdout.splitlines() if line.lstrip().startswith("1 "))
    assert "asset-tags" in first and "[chunk 1/1]" in first and "dense —" in first and "sparse #1" in first


# -- determinism and defaults ---------------------------------------------------------------------


def test_the_same_query_in_two_fresh_processes_gives_the_same_hits(corpus: Corpus) -> None:
    args = ("--home", str(corpus.home), "datasets", "query", "corpus", "--text", "How do I ask for vacation time off?",
            "--json")
    procs = [kx_process(*args) for _ in range(2)]  # side by side: each loads the model itself
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    assert all("Traceback" not in err for _, err in outs)
    first, second = (json.loads(out)["hits"] for out, _ in outs)
    assert [(h["passage_ref"], h["score"]) for h in first] == [(h["passage_ref"], h["score"]) for h in second]
    assert first == second


def test_mode_and_rerank_defaults_come_from_settings(corpus: Corpus, monkeypatch: pytest.MonkeyPatch) -> None:
    default = ask(corpus, "KX-4021")
    assert (default["mode"], default["rerank"]) == ("hybrid", True)

    monkeypatch.setenv("KX_DEFAULT_MODE", "sparse")
    monkeypatch.setenv("KX_RERANK", "off")
    answer = ask(corpus, "KX-4021")
    assert (answer["mode"], answer["rerank"]) == ("sparse", False)
    assert all(h["dense_rank"] is None and h["mmr_moved"] == 0 for h in answer["hits"])
    # a flag still wins over the setting
    flagged = ask(corpus, "KX-4021", "--mode", "dense", "--rerank", "on")
    assert (flagged["mode"], flagged["rerank"]) == ("dense", True)


def test_hybrid_third_list_ranks_the_agreed_head_by_best_sentence(corpus: Corpus) -> None:
    """engine/ranking.py SENTENCE_DEPTH: of the fused top 10, the passages both lists found, ranked by their
    best sentence (answer_span's scorer), are RRF's third list; nothing else gets a sentence rank."""
    from engine.embedding.cards import model_card_for
    from engine.text.answer_span import best_sentence_scores, word_vectors

    question = "mileage rate for driving my own car"
    answer = ask(corpus, question, "--rerank", "off", "--k", "20")
    ranked = [h for h in answer["hits"] if h["sentence_rank"] is not None]
    assert ranked and len(ranked) <= 10
    assert all(h["dense_rank"] is not None and h["sparse_rank"] is not None for h in ranked)  # agreed only
    assert sorted(h["sentence_rank"] for h in ranked) == list(range(1, len(ranked) + 1))
    by_rank = sorted(ranked, key=lambda h: h["sentence_rank"])
    scores = best_sentence_scores([h["text"] for h in by_rank], question, word_vectors(model_card_for("default")))
    assert [h["sentence_score"] for h in by_rank] == [round(s, 6) for s in scores]
    assert scores == sorted(scores, reverse=True)
    for hit in answer["hits"]:  # the third list only reorders the head: it is where the fused order puts it
        assert hit["fused_rank"] == hit["rank"]
    assert "0.30 per kilometre" in answer["hits"][0]["text"] and answer["hits"][0]["sentence_rank"] == 1
    human = kx(corpus, "datasets", "query", "corpus", question)
    assert human.code == 0 and "sentence #1" in human.stdout


def test_hybrid_lead_vote_counts_sparses_decisive_best_once_more(corpus: Corpus) -> None:
    """engine/ranking.py LEAD_RATIO: when sparse's best passage scores at least 1.5 times its runner-up, RRF
    counts it once more at rank 1 (`lead_ratio` carries the ratio); with a narrower margin nobody gets it."""
    from engine.ranking import LEAD_RATIO

    seen = set()
    for question in ("which sticker shows asset tag KX-4021", "submit the vacation leave form in the HR portal"):
        top2 = ask(corpus, question, "--mode", "sparse", "--rerank", "off", "--k", "2")["hits"]
        ratio = top2[0]["sparse_score"] / top2[1]["sparse_score"]
        hits = ask(corpus, question, "--rerank", "off", "--k", "20")["hits"]
        leads = [h for h in hits if h["lead_ratio"] is not None]
        if ratio >= LEAD_RATIO:
            assert [(h["passage_ref"], h["lead_ratio"]) for h in leads] == [(top2[0]["passage_ref"], round(ratio, 6))]
            lead = leads[0]
            assert lead["sparse_rank"] == 1 and lead["rank"] == 1
            assert lead["fused_score"] == pytest.approx(extra_terms(lead) + 1 / 61 + (
                0.0 if lead["dense_rank"] is None else 1 / (60 + lead["dense_rank"])), abs=1e-9)
        else:
            assert not leads
        seen.add(ratio >= LEAD_RATIO)
    assert seen == {True, False}  # both sides of the rule were checked
    human = kx(corpus, "datasets", "query", "corpus", "which sticker shows asset tag KX-4021")
    assert human.code == 0 and "sparse lead" in human.stdout
