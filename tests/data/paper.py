"""A paper handed to ingest as its extraction (pages and headings known exactly), for the provenance tests:
`inject_extraction(monkeypatch, paper_extractor)` makes PAPER_BYTES ingest as PAPER."""

from __future__ import annotations

from engine.extract import Extracted, Section

PAGES = [
    "1 Introduction\n" + "Loggers record the temperature of a cold chain shipment every minute. " * 3,
    "3 Model\n" + "The model is fitted to the readings of each logger. " * 2
    + "3.1 LRS model\n" + "The lagged regression smoother weighs each reading by its age. " * 6,
    "3.2 Validation\n" + "We validated the smoother on forty shipments from two carriers. " * 3,
]


PAPER_TEXT = "".join(PAGES)


PAGE_STARTS = tuple(sum(len(p) for p in PAGES[:i]) for i in range(len(PAGES)))


HEADINGS = {  # heading -> (level, the path a passage under it carries)
    "1 Introduction": (1, "1 Introduction"),
    "3 Model": (1, "3 Model"),
    "3.1 LRS model": (2, "3 Model › 3.1 LRS model"),
    "3.2 Validation": (2, "3 Model › 3.2 Validation"),
}


PAPER = Extracted(
    text=PAPER_TEXT, media_type="application/pdf", page_starts=PAGE_STARTS,
    sections=tuple(Section(PAPER_TEXT.index(h + "\n"), level, h) for h, (level, _) in HEADINGS.items()),
    title="Cold chains, watched", notes=("outline from bookmarks",), extractor="fake-pdf/1",
)


PAPER_BYTES = b"%PDF-1.7 not a real PDF: the test hands ingest its Extracted"


def paper_extractor(doc):
    return PAPER if doc.data == PAPER_BYTES else None


def expected_section(start: int) -> str | None:
    """The section path a passage starting at `start` of PAPER_TEXT must carry."""
    above = [h for h in HEADINGS if PAPER_TEXT.index(h + "\n") <= start]
    return HEADINGS[max(above, key=lambda h: PAPER_TEXT.index(h + "\n"))][1] if above else None
