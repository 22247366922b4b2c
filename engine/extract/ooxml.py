"""An OOXML package (PPTX, XLSX): its parts read through SafeZip's limits and parsed with entities off.

Shared by the slide reader (slides.py) and the spreadsheet reader (sheets.py).
"""

from __future__ import annotations

import posixpath

from ..errors import invalid
from .base import Limits
from .zipsafe import SafeZip

_REL = "{http://schemas.openxmlformats.org/package/2006/relationships}"


class Package:
    """An OOXML package's parts as parsed XML, read through SafeZip."""

    def __init__(self, data: bytes, label: str, kind: str, limits: Limits) -> None:
        from lxml import etree

        self.label, self.kind = label, kind
        self.archive = SafeZip(data, label, kind, limits)
        self._parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)

    def xml(self, name: str):
        from lxml import etree

        raw = self.archive.read(name)
        if raw is None:
            return None
        try:
            return etree.fromstring(raw, self._parser)
        except etree.XMLSyntaxError as exc:
            raise invalid(f"{self.label} is not a readable {self.kind}: {name} is not well-formed XML ({exc}); "
                          "re-save it from its application") from None

    def main_part(self, name: str, application: str):
        """The package's main part (`name`) parsed, or the refusal that the file is not what it claims."""
        root = self.xml(name)
        if root is None:
            raise invalid(f"{self.label} is not a readable {self.kind}: it has no {name}; re-save it from "
                          f"{application} or LibreOffice")
        return root

    def relations(self, part: str) -> dict[str, tuple[str, str, bool]]:
        """rId -> (type, target part path, external?) for `part` (e.g. 'ppt/presentation.xml')."""
        folder, name = posixpath.split(part)
        rels = self.xml(posixpath.join(folder, "_rels", name + ".rels"))
        out: dict[str, tuple[str, str, bool]] = {}
        for rel in rels if rels is not None else []:
            if rel.tag != f"{_REL}Relationship":
                continue
            external = rel.get("TargetMode") == "External"
            target = rel.get("Target", "")
            path = target if external else posixpath.normpath(posixpath.join(folder, target)).lstrip("/")
            out[rel.get("Id", "")] = (rel.get("Type", ""), path, external)
        return out

    def close(self) -> None:
        self.archive.close()
