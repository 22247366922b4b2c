"""EPUB: the book's XHTML chapters in spine (reading) order, chapter titles as sections.

META-INF/container.xml names the package document (OPF); its spine gives the
reading order and its manifest the files. Chapter titles come from the table
of contents (the EPUB 3 nav document, else the EPUB 2 NCX), else from the
chapter's own <title> or first heading. Each chapter's visible text goes
through the HTML path's block reader (engine/extract/html.py): a chapter
is a level-1 section and the headings inside it sit one level below. The
ZIP is read through the bomb-checked reader (engine/extract/zipsafe.py).

Runs in an extraction worker process (engine/extract/pool.py).
"""

from __future__ import annotations

import posixpath
from urllib.parse import unquote

from ..errors import invalid
from ..formats import EPUB, media_type
from .base import Extracted, Limits
from .html import BlockWriter, visible_blocks
from .zipsafe import SafeZip

EXTRACTOR_VERSION = 1
_OPF = "{http://www.idpf.org/2007/opf}"
_DC = "{http://purl.org/dc/elements/1.1/}"
_NCX = "{http://www.daisy.org/z3986/2005/ncx/}"
_OPS = "{http://www.idpf.org/2007/ops}"
_CONTAINER = "{urn:oasis:names:tc:opendocument:xmlns:container}"


def extractor_id() -> str:
    from lxml import etree

    return f"epub/lxml-{'.'.join(map(str, etree.LXML_VERSION[:3]))}/{EXTRACTOR_VERSION}"


def extract_epub(data: bytes, label: str, limits: Limits) -> Extracted:
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, recover=True)
    archive = SafeZip(data, label, "EPUB book", limits)
    try:
        def parse(name: str | None, required: bool = False):
            raw = archive.read(name) if name else None
            root = etree.fromstring(raw, parser) if raw else None
            if root is None and required:
                raise invalid(f"{label} is not a readable EPUB book: {name or 'its package file'} is missing or "
                              "not XML; re-save or re-download it")
            return root

        container = parse("META-INF/container.xml", required=True)
        rootfile = container.find(f".//{_CONTAINER}rootfile")
        opf_path = rootfile.get("full-path") if rootfile is not None else None
        opf = parse(opf_path, required=True)
        base = posixpath.dirname(opf_path or "")  # parse(required=True) refused a missing path already
        manifest = {item.get("id"): item for item in opf.iter(f"{_OPF}item")}

        def path_of(href: str) -> str:
            return posixpath.normpath(posixpath.join(base, unquote(href.split("#", 1)[0])))

        nav = next((i for i in manifest.values() if "nav" in (i.get("properties") or "").split()), None)
        spine = opf.find(f"{_OPF}spine")
        toc_titles: dict[str, str] = {}
        if nav is not None:
            toc_titles = _nav_titles(parse(path_of(nav.get("href"))), posixpath.dirname(path_of(nav.get("href"))))
        elif spine is not None and spine.get("toc") in manifest:
            ncx_path = path_of(manifest[spine.get("toc")].get("href"))
            toc_titles = _ncx_titles(parse(ncx_path), posixpath.dirname(ncx_path))
        book_title = " ".join((opf.findtext(f".//{_DC}title") or "").split()) or None

        writer = BlockWriter()
        for itemref in spine.iter(f"{_OPF}itemref") if spine is not None else ():
            item = manifest.get(itemref.get("idref"))
            if item is None or item is nav or "html" not in (item.get("media-type") or ""):
                continue
            chapter_path = path_of(item.get("href"))
            chapter = parse(chapter_path)
            if chapter is None:
                continue
            body = next((e for e in chapter.iter() if isinstance(e.tag, str) and e.tag.endswith("body")), chapter)
            title = toc_titles.get(chapter_path) or _own_title(chapter)
            writer.flush()
            writer.level_offset = 0
            if title:
                writer.add(title, 1)
            writer.level_offset = 1
            visible_blocks(body, writer, skip_first=title)
    finally:
        archive.close()
    text = writer.text()
    if not text.strip():
        raise invalid(f"{label} is an EPUB book with no text in its spine; there is nothing to index")
    return Extracted(text=text, media_type=media_type(EPUB), sections=tuple(writer.sections),
                     title=book_title, extractor=extractor_id())


def _nav_titles(nav, folder: str) -> dict[str, str]:
    titles: dict[str, str] = {}
    if nav is None:
        return titles
    navs = [n for n in nav.iter() if isinstance(n.tag, str) and n.tag.endswith("nav")]
    toc = next((n for n in navs if n.get(f"{_OPS}type") == "toc"), navs[0] if navs else None)
    for link in (toc.iter() if toc is not None else ()):
        if isinstance(link.tag, str) and (link.tag.endswith("}a") or link.tag == "a"):
            href, text = link.get("href"), " ".join("".join(link.itertext()).split())
            if href and text:
                titles.setdefault(posixpath.normpath(posixpath.join(folder, unquote(href.split("#", 1)[0]))), text)
    return titles


def _ncx_titles(ncx, folder: str) -> dict[str, str]:
    titles: dict[str, str] = {}
    if ncx is None:
        return titles
    for point in ncx.iter(f"{_NCX}navPoint"):
        text = " ".join((point.findtext(f"{_NCX}navLabel/{_NCX}text") or "").split())
        content = point.find(f"{_NCX}content")
        if text and content is not None and content.get("src"):
            src = unquote(content.get("src").split("#", 1)[0])
            titles.setdefault(posixpath.normpath(posixpath.join(folder, src)), text)
    return titles


def _own_title(chapter) -> str | None:
    for element in chapter.iter():
        if not isinstance(element.tag, str):
            continue
        tag = element.tag.rsplit("}", 1)[-1].lower()
        if tag in ("title", "h1", "h2"):
            text = " ".join("".join(element.itertext()).split())
            if text:
                return text
    return None
