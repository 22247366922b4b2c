"""The HTML extractor keeps what a reader sees of the main content (engine/extract/html.py, html_recover.py).

Measured on qa-dev: trafilatura dropped a trial record's sponsor line and a press release's date above its
headline, and wrote a layout table's label/value row as "Ages Eligible for Study: | 18 Years", so phrases
spanning the cells never matched. The pages below are small copies of those shapes.
"""

from __future__ import annotations

from engine.extract.html import extract_html

PARAS = [
    "The county council voted on Tuesday to rebuild the old stone bridge over the river, closed since the floods.",
    "Engineers told the council that the eastern arch had shifted by eleven centimetres and repairs would not last.",
    "Work is to start in March and take fourteen months; a ferry will carry foot passengers across meanwhile.",
    "Shop owners on both banks said the closure had cost them a third of their trade, and asked for help.",
]
MENU = "".join(f'<li><a href="/topics/{i}">Topic number {i}</a></li>' for i in range(40))


def _page(body_class: str = "article-body") -> bytes:
    """A news page: a mega-menu, a release line above the headline (outside the element trafilatura's
    article selector picks), the article, a label/value pair of <div>s, a layout table, share links, a footer."""
    return f"""<!doctype html><html><head><title>Council votes to rebuild the bridge</title></head><body>
<div class="site-top"><ul class="mega-menu">{MENU}</ul></div>
<div id="main"><div class="release"><div>For Immediate Release</div><div>March 3, 2021</div></div>
<h1>Council votes to rebuild the bridge</h1>
<div class="{body_class}">{''.join(f'<p>{p}</p>' for p in PARAS)}
<table><tr><td>Ages Eligible for Study:</td><td>18 Years and older</td></tr>
<tr><td>Bridge</td><td>Span</td></tr></table></div>
<div class="share-tools"><a href="/s/1">Share this story on social media</a></div>
<div class="promo"><a href="/subscribe">Subscribe to the County News today</a></div></div>
<footer><p>Copyright 2021 County News. All rights reserved.</p></footer></body></html>""".encode()


def test_a_label_cell_runs_into_its_value_and_data_cells_stay_apart() -> None:
    text = extract_html(_page(), "bridge.html").text
    assert "Ages Eligible for Study: 18 Years and older" in text
    assert "Bridge | Span" in text  # a data row, no label: its cells stay apart


def test_lines_trafilatura_drops_above_the_headline_come_back_but_no_menu_or_footer() -> None:
    extracted = extract_html(_page(), "bridge.html")
    text = extracted.text
    assert "For Immediate Release\n\nMarch 3, 2021" in text
    assert text.index("March 3, 2021") < text.index(PARAS[0])  # where the reader sees it: above the article
    assert text.count("Council votes to rebuild the bridge") == 1  # the headline is not put back twice
    assert all(p in text for p in PARAS)
    for boilerplate in ("Topic number", "Share this story", "Subscribe", "Copyright"):
        assert boilerplate not in text
    assert extracted.extractor.endswith("/2")  # a new extraction: re-ingested pages record it


def test_a_dropped_label_and_value_block_pair_reads_as_one_phrase() -> None:
    facts = '<div class="facts"><div>Sponsor:</div><div>Wake Forest University Health Sciences</div></div>'
    page = _page().replace(b'<div class="share-tools">', facts.encode() + b'<div class="share-tools">', 1)
    text = extract_html(page, "trial.html").text
    assert "Sponsor:\n\nWake Forest University Health Sciences" in text  # a phrase spanning both matches
    assert text.index("Bridge | Span") < text.index("Sponsor:")  # after the kept block it follows in the page
