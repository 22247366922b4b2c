"""Document formats: real PDF, DOCX and HTML files from ../shared/data/docs, and EPUB/Markdown/DOCX built here.

Extraction is read back the way the catalogue will see it (`Extracted`:
text, page starts, sections, title, notes), and hostile files go through the
worker pool the ingest uses (`extract_many`), with extractors injected by
import path (tests/extract_faults.py) to hang, crash or exhaust memory.
"""

from __future__ import annotations

import io
import os
import re
import time
import zipfile
from pathlib import Path

import pytest

from engine import load_settings
from engine.errors import KxError, Status
from engine.extract import EXTRACTORS, extract, extract_many, page_span, section_path
from engine.extract.detect import detect_format
from engine.extract.pdf import _clean_pages
from engine.text.inputs import DocumentInput, from_bytes, from_file, from_text

from .helpers import SHARED_DOCS, blank_pdf, needs_shared

DOCS = SHARED_DOCS


needs_docs = needs_shared("docs")


BIG = 50 * 2**20


def _doc(relative: str) -> DocumentInput:
    return from_file(DOCS / relative, BIG)


def _read(relative: str):
    return extract(_doc(relative))


def _refusal(doc: DocumentInput) -> KxError:
    with pytest.raises(KxError) as caught:
        extract(doc)
    return caught.value


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_a_pdf_without_a_text_layer_is_refused_suggesting_ocr() -> None:
    error = _refusal(from_bytes(blank_pdf(3), name="scan.pdf", media_type="application/pdf"))
    assert "no text layer" in error.message and "OCR" in error.message and "3 pages" in error.message


def test_the_content_decides_the_format_not_the_name() -> None:
    pdf = blank_pdf(1)
    assert detect_format(from_bytes(pdf, name="report.txt")) == "pdf"
    assert detect_format(from_bytes(b"\xef\xbb\xbf \n<!DOCTYPE html><html><p>x</p></html>", name="page.txt")) == "html"
    assert detect_format(from_bytes(b"  <html lang=en><body>x</body></html>", name="a")) == "html"
    assert detect_format(from_bytes(b'<?xml version="1.0"?>\n<html xmlns="http://www.w3.org/1999/xhtml"/>')) == "html"
    assert detect_format(DocumentInput("f", b"<div>fragment</div>", "/x/f.html")) == "html"
    assert detect_format(DocumentInput("f", b"<div>not a page</div>", "/x/f.md")) == "markdown"
    assert detect_format(from_text("# Title\n\nbody")) == "text"


def _docx(body: str, styles: str = "") -> bytes:
    ns = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", f"<w:document {ns}><w:body>{body}</w:body></w:document>")
        if styles:
            archive.writestr("word/styles.xml", f"<w:styles {ns}>{styles}</w:styles>")
    return out.getvalue()


def _p(text: str, style: str = "") -> str:
    props = f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>' if style else ""
    return f"<w:p>{props}<w:r><w:t xml:space=\"preserve\">{text}</w:t></w:r></w:p>"


def test_docx_tables_and_tracked_changes_read_as_accepted_in_order() -> None:
    body = (
        _p("Quarterly Report", "Title") + _p("Budget", "H1")
        + '<w:p><w:r><w:t xml:space="preserve">We spend </w:t></w:r>'
          '<w:del w:id="1"><w:r><w:delText>nine</w:delText></w:r></w:del>'
          '<w:ins w:id="2"><w:r><w:t>twelve</w:t></w:r></w:ins><w:r><w:t xml:space="preserve"> euros.</w:t></w:r></w:p>'
        + "<w:tbl><w:tr><w:tc>" + _p("Item") + "</w:tc><w:tc>" + _p("Cost") + "</w:tc></w:tr>"
          "<w:tr><w:tc>" + _p("Paper") + "</w:tc><w:tc>" + _p("4 euros") + "</w:tc></w:tr></w:tbl>"
        + _p("After the table.")
        + '<w:p><w:pPr><w:outlineLvl w:val="1"/></w:pPr><w:r><w:t>Outlined</w:t></w:r></w:p>' + _p("Tail.")
    )
    styles = ('<w:style w:styleId="Title"><w:name w:val="Title"/></w:style>'
              '<w:style w:styleId="H1"><w:name w:val="heading 1"/></w:style>')
    extracted = extract(from_bytes(_docx(body, styles), name="report.docx"))
    assert extracted.text == ("Quarterly Report\nBudget\nWe spend twelve euros.\nItem | Cost\nPaper | 4 euros\n"
                              "After the table.\nOutlined\nTail.")
    assert extracted.title == "Quarterly Report"
    assert section_path(extracted.sections, extracted.text.index("Tail")) == "Budget › Outlined"


def test_a_zip_bomb_named_docx_is_refused_before_it_inflates() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("word/document.xml", "w") as member:
            for _ in range(64):
                member.write(bytes(2**20))  # 64 MiB of zeros, ~64 KiB compressed
    data = out.getvalue()
    assert len(data) < 2**20
    error = _refusal(from_bytes(data, name="bomb.docx"))
    assert error.status is Status.RESOURCE_EXHAUSTED and "refused before unpacking" in error.message
    small_limit = load_settings({"extract_max_unpacked_mb": 16})
    with pytest.raises(KxError, match="over the 16,777,216-byte limit"):
        extract(from_bytes(data, name="bomb.docx"), small_limit)


def test_html_headings_become_sections_and_a_page_without_an_article_falls_back() -> None:
    para = "<p>" + "The committee reviewed the proposal and found several issues with the budget. " * 4 + "</p>"
    page = (f"<!doctype html><html><head><title>Guide | Example</title><style>p{{}}</style></head><body>"
            f"<nav><a href='/'>Home</a> <a href='/about'>About us</a></nav><article><h1>Guide to kx</h1>{para}"
            f"<h2>Install steps</h2>{para}<h3>On Linux</h3>{para}</article>"
            "<footer>Copyright 2020 Example Corp</footer><script>track()</script></body></html>")
    extracted = extract(from_bytes(page.encode(), name="guide.html"))
    assert section_path(extracted.sections, len(extracted.text) - 1) == "Guide to kx › Install steps › On Linux"
    for s in extracted.sections:
        assert extracted.text[s.start:].startswith(s.title)
    assert not any(chrome in extracted.text for chrome in ("Copyright 2020", "track()", "About us"))
    bare = extract(from_bytes(b"<html><head><title>Contact</title><script>x()</script></head><body>"
                              b"<footer>Write to 1 Main Street</footer></body></html>", name="contact.html"))
    assert bare.text == "Contact\n\nWrite to 1 Main Street"  # trafilatura finds no article: all visible text
    assert len(bare.notes) == 1 and "no main content was found" in bare.notes[0]


_SUBSET = b"""<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.1//EN" "http://www.w3.org/TR/xhtml11/DTD/xhtml11.dtd" [
  <!ENTITY co "Acme Widgets &amp; Sons">
  <!ENTITY motto "made by &co; <script>steal()</script>">
  <!ENTITY secret SYSTEM "file:///etc/passwd">
  <!ATTLIST p class CDATA #IMPLIED>
]>
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>About &co;</title></head>
<body><p>The company &co; was founded in 1990. Its motto: &motto;. Kept: &secret; the end.</p></body></html>
"""


@pytest.mark.parametrize("name", ["about.xhtml", "about.html"])
def test_an_internal_dtd_subset_is_read_as_text_with_its_entities_expanded_and_none_fetched(name: str) -> None:
    """lxml's HTML parser ended the doctype at the first `>`: the text began with `]>` and kept `&co;`."""
    extracted = extract(from_bytes(_SUBSET, name=name))
    text = _flat(extracted.text)
    assert "]>" not in text and "&co;" not in text and "ENTITY" not in text and "root:" not in text
    assert ("The company Acme Widgets & Sons was founded in 1990. Its motto: made by Acme Widgets & Sons "
            "<script>steal()</script>. Kept: the end.") in text  # an entity's markup is text, never an element
    assert extracted.title == "About Acme Widgets & Sons"
    assert any("external entities (secret) were not fetched" in note for note in extracted.notes)
    bare = extract(from_bytes(b'<!DOCTYPE html [<!ENTITY co "Acme">]><p>Hello &co; world</p>', name="a.html"))
    assert bare.text == "Hello Acme world"
    laughs = b"".join(b'<!ENTITY l%d "%s">' % (i + 1, b"&l%d;" % i * 10) for i in range(9))
    bomb = b'<!DOCTYPE html [<!ENTITY l0 "lol">' + laughs + b"]><p>&l9;</p>"
    error = _refusal(from_bytes(bomb, name="laughs.html"))
    assert error.status is Status.INVALID_ARGUMENT and "expand beyond 16 MB" in error.message


def test_docx_text_after_an_entity_reference_is_kept() -> None:
    """Entities are not resolved (nothing is fetched); the text after one (its lxml tail) was dropped."""
    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    subset = '<!DOCTYPE w:document [<!ENTITY co "Acme &amp; <b>Sons</b>"><!ENTITY ext SYSTEM "file:///etc/passwd">]>'
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("word/document.xml", f"{subset}<w:document {w}><w:body>{_p('Made by &co; in Leeds.')}"
                                              f"{_p('Read &ext; then the rest.')}</w:body></w:document>")
    extracted = extract(from_bytes(out.getvalue(), name="entities.docx"))
    assert extracted.text == "Made by Acme & Sons in Leeds.\nRead  then the rest."


def test_an_epub_reads_its_chapters_in_spine_order_with_chapter_sections(tmp_path: Path) -> None:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("kx-test-book")
    book.set_title("A Small Book")
    book.set_language("en")
    first = epub.EpubHtml(title="The Beginning", file_name="z_first.xhtml", lang="en")
    first.content = "<h1>The Beginning</h1><p>Alpha sentence opens the book.</p><h2>An aside</h2><p>Beta aside.</p>"
    second = epub.EpubHtml(title="The Middle", file_name="a_second.xhtml", lang="en")
    second.content = "<h1>The Middle</h1><p>Gamma sentence in the middle.</p>"
    for chapter in (first, second):
        book.add_item(chapter)
    book.toc = (first, second)
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", first, second]
    path = tmp_path / "small.epub"
    epub.write_epub(str(path), book)

    extracted = extract(from_file(path, BIG))
    text = extracted.text
    assert extracted.title == "A Small Book" and extracted.media_type == "application/epub+zip"
    assert text.index("Alpha sentence") < text.index("Beta aside") < text.index("Gamma sentence")
    assert section_path(extracted.sections, text.index("Beta aside")) == "The Beginning › An aside"
    assert section_path(extracted.sections, text.index("Gamma sentence")) == "The Middle"
    assert text.count("The Beginning") == 1  # the chapter's own <h1> is not repeated


def test_markdown_headings_are_sections_and_front_matter_is_metadata() -> None:
    source = ("---\ntitle: Colour guide\ntags: [ui]\nauthor: Ann\n---\n\n# Colours\n\nIntro.\n\n## Named colours\n\n"
              "```python\n# not a heading\nx = 1\n```\n\nRed is #ff0000.\n\n### Aliases ###\n\nCrimson.\n")
    extracted = extract(DocumentInput("color", source.encode(), "/docs/color.md", "text/markdown"))
    text = extracted.text
    assert text.startswith("# Colours") and "title:" not in text and "Ann" not in text
    assert extracted.title == "Colour guide" and extracted.metadata == {"author": "Ann"}
    assert [(s.level, s.title) for s in extracted.sections] == [(1, "Colours"), (2, "Named colours"), (3, "Aliases")]
    assert section_path(extracted.sections, text.index("Crimson")) == "Colours › Named colours › Aliases"
    assert section_path(extracted.sections, text.index("x = 1")) == "Colours › Named colours"
    plain = extract(DocumentInput("n", b"# not markdown here\nplain", "/docs/n.txt", "text/plain"))
    assert plain.sections == () and plain.text == "# not markdown here\nplain"
    with pytest.raises(KxError, match="only YAML front matter"):
        extract(DocumentInput("e", b"---\ntitle: x\n---\n", "/docs/e.md", "text/markdown"))


def _our_workers() -> list[int]:
    """Extraction worker processes started by this test process (still running)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid() and b"engine.extract.worker" in cmdline \
                and stat.rsplit(")", 1)[1].split()[0] != "Z":
            found.append(int(pid))
    return found


def test_a_pdf_title_comes_from_metadata_only_when_the_first_page_agrees() -> None:
    from engine.extract.pdf import pick_title

    page = "1\nThe WiLI benchmark dataset for written\nlanguage identification\nMartin Thoma\nAbstract—This paper"
    # nine of its ten words are at the top of the page: the metadata's fuller title is kept
    assert pick_title("The WiLI benchmark dataset for written natural language identification", page) == \
        "The WiLI benchmark dataset for written natural language identification"
    creativity = "1\nCreativity in Machine Learning\nMartin Thoma\nE-Mail: info@martin-thoma.de\nAbstract—Recent"
    assert pick_title("Art in Machine Learning", creativity) == "Creativity in Machine Learning"
    assert pick_title("Microsoft Word - draft3.docx", "The Crazy Ones\nOctober 14, 1998\n") == "The Crazy Ones"
    assert pick_title(None, "English:\nHello World\n") is None          # a label, not a heading
    assert pick_title(None, "A PDF with a JPEG image.") is None          # a sentence, not a heading
    assert pick_title(None, "") is None


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
    pdf = blank_pdf(1)
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
