"""Office files written by the formats' own writers (python-pptx, XlsxWriter, odfpy, EbookLib) from known text,
a minimal DOCX and hostile ones built by hand, for tests/test_office_formats.py and tests/test_formats.py."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path


def pptx(path: Path) -> Path:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[1])
    first.shapes.title.text = "Quarterly harbour report"
    first.placeholders[1].text = "Cargo volumes rose by twelve percent\nThe new crane arrives in March"
    first.notes_slide.notes_text_frame.text = "Remind the board about the dredging contract."
    second = deck.slides.add_slide(deck.slide_layouts[5])
    second.shapes.title.text = "Fleet status"
    box = second.shapes.add_textbox(Inches(1), Inches(2), Inches(6), Inches(1))
    run = box.text_frame.paragraphs[0].add_run()
    run.text = "Three trawlers are laid up for repairs to their winches"
    run.hyperlink.address = "http://127.0.0.1:9/never-fetched"  # an external link: kx never follows it
    deck.save(path)
    return path


def xlsx(path: Path) -> Path:
    import xlsxwriter

    book = xlsxwriter.Workbook(str(path))
    revenue = book.add_worksheet("Revenue")
    for row, values in enumerate([["Year", "Revenue", "City"], [1999, 42.5, "Lyon"]]):
        revenue.write_row(row, 0, values)
    revenue.write_row(2, 0, [2000])
    revenue.write_formula(2, 1, "=B2*2", None, 85)  # a formula with the value Excel would have saved
    revenue.write(2, 2, "Nantes")
    staff = book.add_worksheet("Staff")
    staff.write_row(0, 0, ["Name", "Role"])
    staff.write_row(1, 0, ["Ada Quayle", "Harbour master"])
    book.close()
    return path


def odt(path: Path) -> Path:
    from odf.opendocument import OpenDocumentText
    from odf.text import H, P

    doc = OpenDocumentText()
    doc.text.addElement(H(outlinelevel=1, text="Tide tables"))
    doc.text.addElement(P(text="High water at the northern quay is at six in the morning."))
    doc.save(str(path))
    return path


def odp(path: Path) -> Path:
    from odf.draw import Frame, Page, TextBox
    from odf.namespaces import PRESENTATIONNS
    from odf.opendocument import OpenDocumentPresentation
    from odf.presentation import Notes
    from odf.style import MasterPage, PageLayout
    from odf.text import P

    doc = OpenDocumentPresentation()
    layout = PageLayout(name="layout")
    doc.automaticstyles.addElement(layout)
    master = MasterPage(name="master", pagelayoutname=layout)
    doc.masterstyles.addElement(master)
    slides = (("Ferry timetable", "The winter ferry leaves at noon on Sundays.", "Check with the captain."),
              ("Lighthouse", "The lamp was replaced in the spring.", ""))
    for title, body, note in slides:
        page = Page(masterpagename=master)
        doc.presentation.addElement(page)
        for cls, text in (("title", title), ("outline", body)):
            frame = Frame(width="20cm", height="3cm", x="1cm", y="1cm")
            frame.setAttrNS(PRESENTATIONNS, "class", cls)
            box = TextBox()
            box.addElement(P(text=text))
            frame.addElement(box)
            page.addElement(frame)
        if note:
            notes = Notes()
            frame = Frame(width="20cm", height="3cm", x="1cm", y="1cm")
            frame.setAttrNS(PRESENTATIONNS, "class", "notes")
            box = TextBox()
            box.addElement(P(text=note))
            frame.addElement(box)
            notes.addElement(frame)
            page.addElement(notes)
    doc.save(str(path))
    return path


def docx(path: Path, text: str = "The harbour ledger lists every ship that came in.") -> Path:
    """The smallest Word document Word's readers take: one paragraph in word/document.xml."""
    ns = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", f"<w:document {ns}><w:body><w:p><w:r><w:t>{text}</w:t></w:r></w:p>"
                                              "</w:body></w:document>")
    return path


def epub(path: Path, text: str = "The keeper of the harbour light wrote one chapter.") -> Path:
    """A one-chapter EPUB written by EbookLib."""
    from ebooklib import epub as ebook

    book = ebook.EpubBook()
    book.set_identifier("kx-test-chapter")
    book.set_title("One Chapter")
    book.set_language("en")
    chapter = ebook.EpubHtml(title="The Chapter", file_name="chapter.xhtml", lang="en")
    chapter.content = f"<h1>The Chapter</h1><p>{text}</p>"
    book.add_item(chapter)
    book.toc = (chapter,)
    book.add_item(ebook.EpubNcx())
    book.add_item(ebook.EpubNav())
    book.spine = ["nav", chapter]
    ebook.write_epub(str(path), book)
    return path


def xlsx_with_empty_rows(path: Path, rows: int = 1_000_000) -> Path:
    """A workbook whose one sheet declares `rows` empty rows, then one with a value."""
    sheet = io.StringIO()
    sheet.write('<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/'
                'spreadsheetml/2006/main"><sheetData>')
    sheet.write("".join(f'<row r="{r}"/>' for r in range(1, rows + 1)))
    sheet.write(f'<row r="{rows + 1}"><c r="A{rows + 1}" t="inlineStr"><is><t>last row</t></is></c></row>')
    sheet.write("</sheetData></worksheet>")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.'
                         'org/package/2006/content-types"/>')
        archive.writestr("xl/workbook.xml", '<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/'
                         'main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
                         '<sheets><sheet name="Empty" sheetId="1" r:id="rId1"/></sheets></workbook>')
        archive.writestr("xl/_rels/workbook.xml.rels", '<Relationships xmlns="http://schemas.openxmlformats.org/'
                         'package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.'
                         'org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/>'
                         '</Relationships>')
        archive.writestr("xl/worksheets/sheet1.xml", sheet.getvalue())
    return path
