"""The answer spans' stem matcher as set look-ups (engine/text/answer_span.py `_Prefixes`) finds exactly what
the regular expression it replaced finds, on random stems and sentences (accents, digits, case, dots)."""

from __future__ import annotations

import random

from engine.text.answer_span import _matcher, _Pattern, _Prefixes


def test_prefix_look_ups_find_what_the_pattern_finds() -> None:
    rng = random.Random(27)
    alphabet = "abcdeéxyzAÉ_19 .,-"
    for _ in range(5000):
        terms = {"".join(rng.choice("abcdeéx1") for _ in range(rng.randint(1, 6))) for _ in range(rng.randint(1, 5))}
        sentence = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        assert _Prefixes(terms).found(sentence) == _Pattern(terms).found(sentence), (terms, sentence)


def test_stems_with_a_dot_keep_the_pattern() -> None:
    assert isinstance(_matcher({"weigh", "3.5"}), _Pattern)
    assert _matcher({"weigh", "3.5"}).found("It weighed 3.5 kg") == {"weigh", "3.5"}
    assert isinstance(_matcher({"weigh"}), _Prefixes) and _matcher(set()) is None
    assert _matcher({"weigh"}).found("Weighing, weighs; overweight") == {"weigh"}
    assert _matcher({"weigh"}).found("weighingly") == set()   # more than 4 letters past the stem
