"""The offline brain: a research loop and an extractive answer with no model but the embedder.

Reading, in rounds. Every step is one search, ranked deeper than it reads;
its ranking is fused (weighted RRF, engine/agent/fused.py) with every
earlier step's, and the step reads the best fused passages not read yet
(`agent_k` of them). So the first step reads exactly what one hybrid query
of the whole goal would, and a passage that several parts of the goal rank
well is read before one that a single fragment ranks first.
1. Round one: the goal itself; one feedback search from its best passages
   (below); then the goal's parts (engine/agent/text.py): its sentences when
   it has several, each clause, each key phrase — at most `MAX_PARTS` of
   them, broadest first.
2. Later rounds: pseudo-relevance feedback, one search each — the goal's
   text with the words that mark the best relevant passages read so far,
   and, for the dense side, the goal's vector moved towards theirs (Rocchio).
   Each round learns from more of them (`FEEDBACK_SOURCES` more a round).

A passage bears on the goal when its cosine to the goal is at least
`RELEVANT_FLOOR` and at least `RELEVANT_SHARE` of the best seen. A round ends early after `IDLE_STEPS`
steps in a row that read no such passage (the rest of its parts would read
more of the same nothing). The loop
stops when a round brings no new such passage ("no new passages"), when a
`STEADY_ROUNDS` rounds in a row leave the answer as it was ("enough"), or at a bound;
while budget remains and rounds bring new relevant passages, it reads on.

The answer: the sentences of the relevant passages that best cover the goal
without repeating each other — MMR over sentence embeddings, relevance being
the cosine to the goal moved towards the relevant passages (Rocchio), so a
sentence that belongs to the topic scores even when it shares no word with
the goal. A sentence must also answer the goal itself: its own cosine to
the goal at least `GOAL_SENTENCE_FLOOR` and `GOAL_SENTENCE_SHARE` of the best
sentence's (the sick-leave line of a passage about annual leave sits near
the passage, farther from the goal). The sentence holding the most of the
goal's content words (at least `KEY_TERMS_MIN`: a command, a figure) is kept
whatever its cosine. Sentences are whole sentences, never a wrapped line's
fragment (text.sentences). Copies of one sentence (neighbouring passages
overlap) are one candidate. Sentences are grouped by document, in reading
order, each cited.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..agent_run import OFFLINE, AgentRun, Citation, StopReason
from ..config import SPEC_BY_NAME
from ..fusion import mmr
from ..records import Hit
from ..text.markdown_plain import as_text, is_markdown
from .fused import FusedCandidates
from .reader import EmbedFn, Reader
from .text import CLAUSE, GOAL, PHRASE, SENTENCE, content_words, feedback_terms, goal_parts, normalised, sentences

RELEVANT_FLOOR = 0.25      # all-MiniLM-L6-v2 cosines of unrelated text sit below ~0.15
RELEVANT_SHARE = 0.6       # of the best passage's cosine
DOCUMENT_SHARE = 0.4       # a document's summed relevance against the best document's
SENTENCE_SHARE = 0.55      # of the best sentence's relevance
MAX_SENTENCES = 10
SENTENCE_LAMBDA = 0.6      # MMR over sentences: relevance against repetition
DUPLICATE_COSINE = 0.92    # two sentences this close say the same thing
# the cosine at which MMR counts a sentence a near-duplicate: the setting's declared default, as for passages
SENTENCE_DUPLICATE = SPEC_BY_NAME["mmr_duplicate_threshold"].default()
MAX_PARTS = 8              # parts of the goal searched in round one; a long goal has dozens of clauses
RANK_DEPTH = 100           # how deep each search ranks for the fusion (the engine may clamp it to its max_k)
FEEDBACK = "feedback"
# How much each kind of search weighs in the fusion: the goal and its whole sentences say what is
# wanted; a clause or phrase is a fragment and ranks fragments' passages, so it counts half.
WEIGHTS = {GOAL: 1.0, SENTENCE: 1.0, CLAUSE: 0.5, PHRASE: 0.5, FEEDBACK: 1.0}
WHY = {GOAL: "the goal", SENTENCE: "a sentence of the goal", CLAUSE: "a clause of the goal",
       PHRASE: "a key phrase of the goal"}
FEEDBACK_SOURCES = 3       # relevant passages the first feedback round learns from; each round adds as many
FEEDBACK_TERMS = 5
STEADY_ROUNDS = 2          # "enough": this many rounds in a row left the answer as it was
IDLE_STEPS = 2             # a round ends after this many steps in a row read no relevant passage
GOAL_SENTENCE_FLOOR = 0.2  # an answer sentence's own cosine to the goal (unrelated text sits below ~0.15)
GOAL_SENTENCE_SHARE = 0.5  # ... and at least this share of the best sentence's
KEY_TERMS_MIN = 2          # the sentence holding the most goal words (at least this many) is always kept


@dataclass
class _Search:
    query: str
    kind: str
    why: str
    vector: np.ndarray | None = None


@dataclass
class _Sentence:
    text: str
    ref: str
    offset: int


class OfflineBrain:
    """Sub-queries, pseudo-relevance feedback, extractive answer. See the module head."""

    def __init__(self, embed: EmbedFn, rrf_k: int) -> None:
        self.embed = embed
        self.rrf_k = rrf_k  # settings.rrf_k: the engine's own fusion constant
        self._vectors: dict[str, np.ndarray] = {}
        self._top: dict[str, float] = {}   # ref -> sum of weight / rank over the run's searches (no RRF damping)
        self._goal = ""

    def _vectors_for(self, texts: list[str]) -> np.ndarray:
        missing = sorted({t for t in texts if t not in self._vectors})
        if missing:
            for text, vector in zip(missing, np.asarray(self.embed(missing), dtype=np.float32)):
                self._vectors[text] = vector
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        return np.stack([self._vectors[t] for t in texts])

    def run(self, goal: str, reader: Reader) -> AgentRun:
        self._goal = goal
        goal_vector = self._vectors_for([goal])[0]
        fused = FusedCandidates(self.rrf_k)
        relevance: dict[str, float] = {}
        asked: set[str] = set()
        answer_keys: tuple[str, ...] | None = None
        unchanged = 0
        depth = min(RANK_DEPTH, max(reader.bounds.max_passages, reader.bounds.k))
        plan: list = [_Search(q, kind, WHY[kind]) for q, kind in goal_parts(goal)[:1 + MAX_PARTS]]
        plan.insert(1, FEEDBACK)  # feedback from the goal's own best passages, early: its ranking guides most reads
        rounds, stop = 1, None
        while stop is None:
            round_new = 0
            idle = 0  # steps in a row that read nothing relevant
            for search in plan:
                stop = reader.exhausted()
                if stop:
                    break
                if search == FEEDBACK:
                    search = self._feedback(goal, goal_vector, reader, relevance, fused, 1)
                    if search is None:
                        continue
                key = search.query.lower() if search.vector is None else f"{FEEDBACK}:{search.query.lower()}"
                if key in asked:
                    continue
                asked.add(key)
                ranking = reader.rank(search.query, depth=depth, vector=search.vector)
                fused.add(ranking.hits, WEIGHTS[search.kind])
                for i, h in enumerate(ranking.hits, start=1):
                    self._top[h.passage_ref] = self._top.get(h.passage_ref, 0.0) + WEIGHTS[search.kind] / i
                step = reader.read(ranking, fused.best(reader.bounds.k, skip=reader.hits), why=search.why)
                self._judge(reader, step.new_refs, goal_vector, relevance)
                floor = self._floor(relevance)
                step.relevant_new = sum(1 for r in step.new_refs if relevance[r] >= floor)
                round_new += step.relevant_new
                reader.report(step)
                idle = 0 if step.relevant_new else idle + 1
                if idle >= IDLE_STEPS:
                    break  # the rest of this round's parts would read more of the same nothing
            if stop:
                break
            if round_new == 0:
                stop = StopReason.NO_NEW
                break
            keys = tuple(s.text for s in self._answer_sentences(goal_vector, reader, relevance))
            unchanged = unchanged + 1 if keys == answer_keys else 0
            if unchanged >= STEADY_ROUNDS:
                stop = StopReason.ENOUGH
                break
            answer_keys = keys
            search = self._feedback(goal, goal_vector, reader, relevance, fused, rounds)
            if search is None or f"{FEEDBACK}:{search.query.lower()}" in asked:
                stop = StopReason.ENOUGH  # every relevant passage has already lent its words
                break
            plan, rounds = [search], rounds + 1
        return self._finish(goal, goal_vector, reader, relevance, stop)

    def _judge(self, reader: Reader, refs: list[str], goal_vector: np.ndarray, relevance: dict[str, float]) -> None:
        """How much each newly read passage bears on the goal: its cosine to the goal."""
        if refs:
            vectors = self._vectors_for([reader.hits[r].text for r in refs])
            for ref, vector in zip(refs, vectors):
                relevance[ref] = float(vector @ goal_vector)

    def _feedback(self, goal: str, goal_vector: np.ndarray, reader: Reader, relevance: dict[str, float],
                  fused: FusedCandidates, rounds: int) -> _Search | None:
        """Pseudo-relevance feedback from the best relevant passages read (best fused first).

        Sparse: the goal's text plus the words that mark those passages
        against everything read. Dense: the goal's vector moved towards
        theirs (Rocchio), so passages like the best ones rank up even where
        they share no word with the goal.
        """
        sources = fused.order(self._relevant(relevance))[:FEEDBACK_SOURCES * rounds]
        if not sources:
            return None
        texts = [reader.hits[r].text for r in sources]
        terms = feedback_terms(texts, [h.text for h in reader.hits.values()], set(content_words(goal)), FEEDBACK_TERMS)
        vector = goal_vector + self._vectors_for(texts).mean(axis=0)
        vector = vector / (np.linalg.norm(vector) or 1.0)
        names = ", ".join(f"{reader.hits[r].document_name} {reader.hits[r].label}" for r in sources[:3])
        more = f" and {len(sources) - 3} more" if len(sources) > 3 else ""
        why = f"feedback from {names}{more}" + (f": + {' '.join(terms)}" if terms else "")
        return _Search(f"{goal} {' '.join(terms)}".strip(), FEEDBACK, why, vector)

    @staticmethod
    def _floor(relevance: dict[str, float]) -> float:
        best = max(relevance.values(), default=0.0)
        return max(RELEVANT_FLOOR, RELEVANT_SHARE * best)

    def _relevant(self, relevance: dict[str, float]) -> list[str]:
        floor = self._floor(relevance)
        return sorted((r for r, v in relevance.items() if v >= floor), key=lambda r: (-relevance[r], r))

    def _answer_sentences(self, goal_vector: np.ndarray, reader: Reader,
                          relevance: dict[str, float]) -> list[_Sentence]:
        relevant = self._relevant(relevance)
        if not relevant:
            return []
        # documents that bear on the goal as a whole, not through one stray passage: each relevant
        # passage counts its cosine times the sum of 1/rank over the run's searches (steep where RRF is
        # flat), so a document the searches put on top outweighs one that merely reads alike and was
        # read because the loop read on (a small dataset is read nearly whole)
        by_document: dict[str, float] = {}
        for ref in relevant:
            doc = reader.hits[ref].document_ref
            by_document[doc] = by_document.get(doc, 0.0) + relevance[ref] * self._top.get(ref, 0.0)
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
        # a sentence must answer the goal itself, not only sit in a passage about it: its own cosine to the
        # goal (sick-leave lines in a passage about refunds are near the passage, far from the goal)
        own = vectors @ goal_vector
        keep = ((scores >= SENTENCE_SHARE * float(scores.max()))
                & (own >= max(GOAL_SENTENCE_FLOOR, GOAL_SENTENCE_SHARE * float(own.max()))))
        # the sentence carrying most of the goal's words (a command, a figure) is kept whatever its cosine
        key_words = set(content_words(self._goal))
        hold = [len(key_words & set(content_words(s.text))) for s in pool]
        best_hold = max(range(len(pool)), key=lambda i: (hold[i], float(own[i]), -i))
        carrier = pool[best_hold] if hold[best_hold] >= min(KEY_TERMS_MIN, len(key_words)) > 0 else None
        if carrier is not None:
            keep[best_hold] = True
        pool = [s for s, k in zip(pool, keep) if k]
        vectors, scores = vectors[keep], scores[keep]
        keys = [f"{s.ref}:{s.offset:08d}" for s in pool]
        order = mmr(keys, scores.tolist(), vectors, len(pool), SENTENCE_LAMBDA, SENTENCE_DUPLICATE).order
        if carrier is not None:
            first = pool.index(carrier)
            order = [first] + [i for i in order if i != first]
        picked: list[int] = []
        for i in order:
            if len(picked) == MAX_SENTENCES:
                break
            if all(float(vectors[i] @ vectors[j]) < DUPLICATE_COSINE for j in picked):
                picked.append(i)
        return [pool[i] for i in picked]

    def _finish(self, goal: str, goal_vector: np.ndarray, reader: Reader, relevance: dict[str, float],
                stop: StopReason) -> AgentRun:
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
                hit = hits[s.ref]   # a Markdown passage's sentence as its text: no '**' or '#' in the answer
                text = " ".join(as_text(s.text).split()) if is_markdown(hit.source_path, hit.text) else s.text
                lines.append(f"- {text} {citation.label}")
                if s.ref not in cited:
                    cited.add(s.ref)
                    citations.append(citation)
            lines.append("")
        return "\n".join(lines).rstrip() + "\n", citations
