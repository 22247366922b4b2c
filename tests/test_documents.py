"""The end-to-end half of tests/unit/test_documents.py (a model, processes or servers there):
Document formats: real PDF, DOCX and HTML files from ../shared/data/docs, and EPUB/Markdown/DOCX built here.
"""

from __future__ import annotations

import os
import re
import time

import pytest

from engine import load_settings
from engine.errors import KxError, Status
from engine.extract import EXTRACTORS, extract, extract_many, page_span, section_path
from engine.extract.pdf import _clean_pages
from engine.text.inputs import DocumentInput, from_bytes, from_text

from .unit.test_documents import BIG, DOCS, _blank_pdf, _doc, _flat, _our_workers, _read, _refusal, needs_docs  # noqa: F401 - helpers and fixtures


@needs_docs
@pytest.mark.parametrize("name, pages", [("1601.03642.pdf", 8), ("1801.07779.pdf", 12), ("crazyones.pdf", 1),
                                         ("multilang.pdf", 1), ("side-by-side-subfig.pdf", 1), ("jpeg.pdf", 1)])
def test_every_pdf_has_its_page_count(name: str, pages: int) -> None:
    extracted = _read(f"pdf/{name}")
    assert extracted.page_count == pages
    assert list(extracted.page_starts) == sorted(extracted.page_starts) and extracted.page_starts[0] == 0
    assert extracted.media_type == "application/pdf" and extracted.extractor.startswith("pdf/pypdfium2-")


@needs_docs
def test_a_sentence_lies_inside_its_pages_text_span() -> None:
    extracted = _read("pdf/1601.03642.pdf")
    found = re.search(r"Chatbots\s+are\s+computer\s+programs\s+which\s+participate\s+in\s+chat\s+rooms",
                      extracted.text)
    assert found, "the sentence from page 4 is missing"
    assert page_span(extracted.page_starts, found.start(), found.end()) == (4, 4)
    starts = extracted.page_starts
    assert starts[3] <= found.start() < found.end() <= starts[4]
    # and the page before holds the text that ends page 3 in the PDF, not this sentence
    assert "Chatbots are computer programs" not in _flat(extracted.text[starts[2]:starts[3]])


@needs_docs
def test_ligatures_and_line_end_hyphens_are_undone() -> None:
    text = _read("pdf/1601.03642.pdf").text
    assert "A formal definition of the field of Machine Learning" in _flat(text)  # set with ﬁ ligatures
    assert not any(0xFB00 <= ord(ch) <= 0xFB06 for ch in text)
    assert "experience E with respect" in _flat(text)  # "experi-/ence" across a line end
    assert "feed-forward" in text  # a real hyphen: the paper writes it so elsewhere
    assert "\x02" not in text and "\r" not in text
    # the normalisation itself, on code points a library might hand back
    assert _clean_pages(["de\ufb01nition of the \ufb01rst \ufb02ow, \ufb03x \ufb04e ½ x²"]) == \
        ["definition of the first flow, ffix ffle ½ x²"]  # only ligatures: ½ and ² stay


@needs_docs
def test_the_outline_gives_nested_sections_at_their_headings() -> None:
    extracted = _read("pdf/1601.03642.pdf")
    titles = [s.title for s in extracted.sections]
    assert titles[:4] == ["I Introduction", "II Basics of Machine Learning", "III Image Data", "III-A Google DeepDream"]
    deep = next(s for s in extracted.sections if s.title == "III-A Google DeepDream")
    assert extracted.text[deep.start:deep.start + 19] == "A. Google DeepDream"
    assert section_path(extracted.sections, deep.start + 50) == "III Image Data › III-A Google DeepDream"
    assert [s.start for s in extracted.sections] == sorted(s.start for s in extracted.sections)
    # its metadata says "Art in Machine Learning" (its LaTeX left it stale): the first page's heading wins
    assert extracted.title == "Creativity in Machine Learning"


@needs_docs
def test_non_latin_scripts_come_through() -> None:
    text = _read("pdf/multilang.pdf").text
    for words in ("Hello World", "Привет, мир", "你好世界", "مرحبا بالعالم", "こんにちは世界"):
        assert words in text


@needs_docs
@pytest.mark.parametrize("name", ["r6-user-password.pdf", "libreoffice-writer-password.pdf"])
def test_encrypted_pdfs_are_refused_as_password_protected(name: str) -> None:
    error = _refusal(_doc(f"pdf/{name}"))
    assert error.status is Status.INVALID_ARGUMENT
    assert "password-protected" in error.message and name in error.message


@needs_docs
def test_a_page_that_is_mostly_image_is_ingested_with_a_note() -> None:
    extracted = _read("pdf/jpeg.pdf")
    assert extracted.text == "A PDF with a JPEG image."
    assert len(extracted.notes) == 1 and "page 1 is mostly image" in extracted.notes[0] and "OCR" in extracted.notes[0]


@needs_docs
def test_damaged_and_fake_pdfs_are_refused_with_the_reason() -> None:
    data = (DOCS / "pdf" / "1601.03642.pdf").read_bytes()
    truncated = _refusal(from_bytes(data[: len(data) // 2], name="half.pdf"))
    assert "not a readable PDF" in truncated.message and "damaged or truncated" in truncated.message
    fake = _refusal(DocumentInput("noise", data=os.urandom(4096), source_path="/tmp/noise.pdf",
                                  media_type="application/pdf"))
    assert "named or typed as a PDF but its bytes are not one" in fake.message


@needs_docs
def test_an_absurd_page_count_is_refused_before_reading_pages() -> None:
    doc = _doc("pdf/1601.03642.pdf")
    with pytest.raises(KxError) as caught:
        extract(doc, load_settings({"extract_max_pages": 5}))
    assert caught.value.status is Status.RESOURCE_EXHAUSTED
    assert "8 pages, over the 5-page limit (KX_EXTRACT_MAX_PAGES)" in caught.value.message


@needs_docs
def test_docx_headings_give_nested_section_paths() -> None:
    extracted = _read("docx/headers.docx")
    last = extracted.text.rindex("Some more plain text.")
    assert section_path(extracted.sections, last) == (
        "A Test of Headers › Second Level › Third level › Fourth level › Fifth level › Sixth level")
    first = extracted.text.index("Some plain text.")
    assert section_path(extracted.sections, first) == "A Test of Headers › Second Level"
    assert section_path(_read("docx/lists.docx").sections, 100) == "Some nested lists"


@needs_docs
def test_docx_list_items_notes_and_words_are_what_a_reader_sees() -> None:
    lists = _read("docx/lists.docx").text.splitlines()
    assert {"1. one", "2. two", "a. a", "b. b", "• three", "• four", "• Different list adjacent to the one above."} \
        <= set(lists)
    definitions = _read("docx/definition_list.docx").text
    assert "Term 2 with inline markup" in definitions and "{ some code, part of Definition 2 }" in definitions
    notes = _read("docx/notes.docx").text
    assert "Test footnote.[1] Test endnote.[i]" in notes
    assert notes.index("[1] My note.") > notes.index("Test endnote.")  # notes follow the body
    assert "[i] This is an endnote at the end of the document." in notes
    assert "Hello, 世界. This costs €10." in _read("docx/unicode.docx").text
    inline = _read("docx/inline_formatting.docx").text
    assert "Regular text italics bold bold italics." in inline and "This is Small Caps, and this is strikethrough." \
        in inline


@needs_docs
def test_docx_comments_are_not_body_text() -> None:
    text = _read("docx/comments.docx").text
    assert "I want some text to have a comment on it." in text
    for comment in ("I left a comment.", "A comment across paragraphs.", "Do something else."):
        assert comment not in text


@needs_docs
@pytest.mark.parametrize("name, article, chrome", [
    ("theguardian.com.academics.html",
     ["Thousands of academic staff at British universities are being treated as second-class citizens",
      "Jo Grady, the UCU general secretary, said students would be shocked"],
     ["switch to the Australia edition", "Search jobs", "Make a contribution"]),
    ("reuters.com.parasite.html",
     ["was the upset winner at the Screen Actors Guild (SAG) awards on Sunday",
      "“Parasite” director Bong Joon Ho said backstage"],
     ["Discover Thomson Reuters", "Directory of sites", "for-tablet-portrait-up"]),
])
def test_saved_news_pages_give_their_article_not_their_chrome(name: str, article, chrome) -> None:
    extracted = _read(f"html/{name}")
    flat = _flat(extracted.text)
    for phrase in article:
        assert phrase in flat
    for phrase in chrome:
        assert phrase not in flat
    assert extracted.title and extracted.text.startswith(extracted.title) and extracted.notes == ()
    assert len(extracted.text) < 8000  # the article, not the 0.4-0.7 MB of markup


@needs_docs
def test_a_page_with_next_to_no_article_is_ingested_with_what_it_has() -> None:
    extracted = _read("html/scmp.com.playbook.html")
    assert extracted.title == "Carrie Lam should study Tsai Ing-wen’s playbook"
    assert "the Taiwanese leader shrewdly capitalised on the crisis in Hong Kong" in extracted.text  # its summary
    assert "speaks during a televised policy debate in Taipei" in extracted.text  # the caption, its "body"
    assert "READ FULL ARTICLE" not in extracted.text and "FOLLOW" not in extracted.text
    assert len(extracted.notes) == 1 and "article body seems not to have been saved" in extracted.notes[0]


@needs_docs
def test_hung_crashed_and_hungry_extractors_are_refused_and_the_rest_go_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(EXTRACTORS, "pdf", "tests.extract_faults:by_name")
    pdf = _blank_pdf(1)
    docs = [
        _doc("pdf/crazyones.pdf"),
        from_bytes(pdf, name="sleepy.pdf"),
        _doc("docx/notes.docx"),
        from_bytes(pdf, name="crashy.pdf"),
        from_text("A plain note in between."),
        from_bytes(pdf, name="hungry.pdf"),
        _doc("pdf/multilang.pdf"),
    ]
    settings = load_settings({"extract_timeout": 2, "extract_workers": 2, "extract_memory_mb": 256})
    began = time.monotonic()
    results = list(extract_many(docs, settings))
    elapsed = time.monotonic() - began
    assert [doc.name for doc, _ in results] == [d.name for d in docs]  # input order
    outcomes = {doc.name: r for doc, r in results}
    assert "Heres to the crazy ones" in outcomes["crazyones"].text  # the PDF maps no glyph to its apostrophe
    assert "My note." in outcomes["notes"].text
    assert outcomes[docs[4].name].text == "A plain note in between."
    assert "Hello World" in outcomes["multilang"].text
    slept, crashed, hungry = outcomes["sleepy.pdf"], outcomes["crashy.pdf"], outcomes["hungry.pdf"]
    assert isinstance(slept, KxError) and slept.status is Status.RESOURCE_EXHAUSTED
    assert "extraction took longer than 2 s (KX_EXTRACT_TIMEOUT)" in slept.message
    assert isinstance(crashed, KxError) and "extractor crashed" in crashed.message and "SIGSEGV" in crashed.message
    assert isinstance(hungry, KxError) and hungry.status is Status.RESOURCE_EXHAUSTED
    assert "more than the 256 MiB allowed (KX_EXTRACT_MEMORY_MB)" in hungry.message
    assert elapsed < 30  # the hang cost its time limit, not the batch
    assert _our_workers() == []  # every worker stopped, the killed ones reaped


@needs_docs
def test_an_abandoned_extraction_stops_its_workers() -> None:
    docs = [_doc("pdf/crazyones.pdf"), _doc("docx/lists.docx"), _doc("pdf/multilang.pdf")]
    stream = extract_many(docs, load_settings({"extract_workers": 2}))
    doc, first = next(stream)
    assert doc.name == "crazyones" and first.page_count == 1
    assert _our_workers()
    stream.close()
    assert _our_workers() == []
