"""The offline brain: a research loop and an extractive answer with no model but the embedder.

Reading, in rounds:
1. the goal's own words, its content words, each clause and each key phrase
   (engine/agent/text.py) — one search each;
2. then pseudo-relevance feedback: for the best passages read and not used
   yet, the goal's words plus the terms that mark that passage.

A passage bears on the goal when its cosine to the goal is at least
`RELEVANT_FLOOR` and at least `RELEVANT_SHARE` of the best seen. The loop
stops when a round brings no new such passage ("no new passages"), when a
round's new passages leave the answer as it was ("enough"), or at a bound.

The answer: the sentences of the relevant passages that best cover the goal
without repeating each other — MMR over sentence embeddings, relevance being
the cosine to the goal moved towards the relevant passages (Rocchio), so a
sentence that belongs to the topic scores even when it shares no word with
the goal. Copies of one sentence (neighbouring passages overlap) are one
candidate. Sentences are grouped by document, in reading order, each cited.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..fusion import mmr
from ..records import Hit
from .reader import EmbedFn, Reader
from .records import ENOUGH, NO_NEW, OFFLINE, AgentRun, Citation
from .text import content_words, feedback_terms, normalised, sentences, sub_queries

RELEVANT_FLOOR = 0.25      # all-MiniLM-L6-v2 cosines of unrelated text sit below ~0.15
RELEVANT_SHARE = 0.6       # of the best passage's cosine
DOCUMENT_SHARE = 0.4       # a document's summed relevance against the best document's
SENTENCE_SHARE = 0.55      # of the best sentence's relevance
MAX_SENTENCES = 10
SENTENCE_LAMBDA = 0.6      # MMR over sentences: relevance against repetition
DUPLICATE_COSINE = 0.92    # two sentences this close say the same thing
FEEDBACK_PER_ROUND = 2
FEEDBACK_TERMS = 4


@dataclass
class _Sentence:
    text: str
    ref: str
    offset: int


class OfflineBrain:
    """Sub-queries, pseudo-relevance feedback, extractive answer. See the module head."""

    def __init__(self, embed: EmbedFn) -> None:
        self.embed = embed
        self._vectors: dict[str, np.ndarray] = {}

    def _vectors_for(self, texts: list[str]) -> np.ndarray:
        missing = sorted({t for t in texts if t not in self._vectors})
        if missing:
            for text, vector in zip(missing, np.asarray(self.embed(missing), dtype=np.float32)):
                self._vectors[text] = vector
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        return np.stack([self._vectors[t] for t in texts])

    def run(self, goal: str, reader: Reader) -> AgentRun:
        goal_vector = self._vectors_for([goal])[0]
        goal_terms = set(content_words(goal))
        relevance: dict[str, float] = {}
        asked: set[str] = set()
        used_for_feedback: set[str] = set()
        answer_keys: tuple[str, ...] | None = None
        plan = [(q, "the goal" if i == 0 else "a clause or key phrase of the goal")
                for i, q in enumerate(sub_queries(goal))]
        stop = None
        while stop is None:
            round_new = 0
            for query, why in plan:
                if query.lower() in asked:
                    continue
                stop = reader.exhausted()
                if stop:
                    break
                asked.add(query.lower())
                step, _hits = reader.search(query, why=why)
                if step.new_refs:
                    vectors = self._vectors_for([reader.hits[r].text for r in step.new_refs])
                    for ref, vector in zip(step.new_refs, vectors):
                        relevance[ref] = float(vector @ goal_vector)
                floor = self._floor(relevance)
                step.relevant_new = sum(1 for r in step.new_refs if relevance[r] >= floor)
                round_new += step.relevant_new
                reader.report(step)
            if stop:
                break
            if round_new == 0:
                stop = NO_NEW
                break
            keys = tuple(s.text for s in self._answer_sentences(goal_vector, reader, relevance))
            if answer_keys is not None and keys == answer_keys:
                stop = ENOUGH
                break
            answer_keys = keys
            plan = self._feedback_plan(reader, relevance, goal_terms, used_for_feedback)
            if not plan:
                stop = ENOUGH  # every relevant passage has already lent its words
        return self._finish(goal, goal_vector, reader, relevance, stop)

    @staticmethod
    def _floor(relevance: dict[str, float]) -> float:
        best = max(relevance.values(), default=0.0)
        return max(RELEVANT_FLOOR, RELEVANT_SHARE * best)

    def _relevant(self, relevance: dict[str, float]) -> list[str]:
        floor = self._floor(relevance)
        return sorted((r for r, v in relevance.items() if v >= floor), key=lambda r: (-relevance[r], r))

    def _feedback_plan(self, reader: Reader, relevance: dict[str, float], goal_terms: set[str],
                       used: set[str]) -> list[tuple[str, str]]:
        relevant = self._relevant(relevance)
        fresh = [r for r in relevant if r not in used][:FEEDBACK_PER_ROUND]
        core = " ".join(sorted(goal_terms, key=lambda w: w))
        texts = [reader.hits[r].text for r in reader.hits]
        plan = []
        for ref in fresh:
            used.add(ref)
            terms = feedback_terms([reader.hits[ref].text], texts, goal_terms, FEEDBACK_TERMS)
            if terms:
                hit = reader.hits[ref]
                plan.append((f"{core} {' '.join(terms)}".strip(),
                             f"feedback from {hit.document_name} {hit.label}"))
        return plan

    def _answer_sentences(self, goal_vector: np.ndarray, reader: Reader,
                          relevance: dict[str, float]) -> list[_Sentence]:
        relevant = self._relevant(relevance)
        if not relevant:
            return []
        # documents that bear on the goal as a whole, not through one stray passage
        by_document: dict[str, float] = {}
        for ref in relevant:
            doc = reader.hits[ref].document_ref
            by_document[doc] = by_document.get(doc, 0.0) + relevance[ref]
        best_document = max(by_document.values())
        kept = [r for r in relevant if by_document[reader.hits[r].document_ref] >= DOCUMENT_SHARE * best_document]
        # Rocchio: the goal moved towards what the relevant passages are about
        passages = self._vectors_for([reader.hits[r].text for r in kept])
        target = goal_vector + passages.mean(axis=0)
        target = target / (np.linalg.norm(target) or 1.0)

        candidates: dict[str, _Sentence] = {}
        for ref in sorted(kept, key=lambda r: (reader.hits[r].document_ref, reader.hits[r].chunk_index)):
            for offset, text in sentences(reader.hits[ref].text):
                candidates.setdefault(normalised(text), _Sentence(text, ref, offset))
        pool = list(candidates.values())
        if not pool:
            return []
        vectors = self._vectors_for([s.text for s in pool])
        scores = vectors @ target
        keep = scores >= SENTENCE_SHARE * float(scores.max())
        pool = [s for s, k in zip(pool, keep) if k]
        vectors, scores = vectors[keep], scores[keep]
        keys = [f"{s.ref}:{s.offset:08d}" for s in pool]
        order = mmr(keys, scores.tolist(), vectors, len(pool), SENTENCE_LAMBDA).order
        picked: list[int] = []
        for i in order:
            if len(picked) == MAX_SENTENCES:
                break
            if all(float(vectors[i] @ vectors[j]) < DUPLICATE_COSINE for j in picked):
                picked.append(i)
        return [pool[i] for i in picked]

    def _finish(self, goal: str, goal_vector: np.ndarray, reader: Reader, relevance: dict[str, float],
                stop: str) -> AgentRun:
        chosen = self._answer_sentences(goal_vector, reader, relevance)
        if not chosen:
            best = max(relevance.values(), default=None)
            closest = ("" if best is None
                       else f" (the closest had cosine {best:.2f} to the goal, under {RELEVANT_FLOOR})")
            answer = (f"Nothing found: none of the {len(reader.hits)} passages read in dataset '{reader.dataset}' "
                      f"bears on this goal{closest}.")
            return reader.finish(goal, OFFLINE, stop, answer, [], found=False)
        return reader.finish(goal, OFFLINE, stop, *self._write(reader, chosen))

    @staticmethod
    def _write(reader: Reader, chosen: list[_Sentence]) -> tuple[str, list[Citation]]:
        """Sentences grouped by document (best document first), in reading order, each cited."""
        hits: dict[str, Hit] = reader.hits
        documents: list[str] = []
        for s in chosen:
            if hits[s.ref].document_ref not in documents:
                documents.append(hits[s.ref].document_ref)
        lines, citations, cited = [], [], set()
        for doc in documents:
            mine = sorted((s for s in chosen if hits[s.ref].document_ref == doc),
                          key=lambda s: (hits[s.ref].chunk_index, s.offset))
            lines.append(f"From {hits[mine[0].ref].document_name}:")
            for s in mine:
                citation = reader.citation(s.ref)
                lines.append(f"- {s.text} {citation.label}")
                if s.ref not in cited:
                    cited.add(s.ref)
                    citations.append(citation)
            lines.append("")
        return "\n".join(lines).rstrip() + "\n", citations
