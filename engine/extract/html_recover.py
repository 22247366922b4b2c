"""Lines of a page's main content that trafilatura dropped, put back where the reader sees them.

trafilatura keeps paragraphs it scores as article text and drops short
blocks around them: measured on qa-dev (benchmarks/qa.py), a trial record's
"Sponsor:" / sponsor-name pair of <div>s, its "Detailed Description", and a
press release's "For Immediate Release" / date line above the headline were
gone, and three of 45 answers with them. So the page is walked again (a
fresh tree: trafilatura prunes the one it is given), block by block, and:

- the main region is the deepest element holding nearly all (`_REGION_SHARE`)
  of the text trafilatura kept (its long blocks found again in the fresh
  walk) and the headline (the heading that reads as the page's title: a
  release line above it belongs to the article);
- a block inside it that trafilatura's text does not contain comes back,
  placed after the kept block that precedes it in the page, unless it is
  boilerplate: inside <nav>/<header>/<footer>/<aside>/<form>, a navigation,
  banner or footer role, an element whose class or id says menu, nav,
  breadcrumb, share, cookie, advert, ..., or mostly link text (menus are).

A page whose kept text spreads over the whole <body> gets a region of
<body>, where the boilerplate rules alone stand between a mega-menu and the
text. On the seven saved pages of ../shared/data (docs/html, qa-dev/html) no menu, ad or footer came
back: what did is the trial record's sponsor, summary and design lines, the release line, a byline and
video credit, and a slideshow caption (BENCHMARKS.md, round 4).
"""

from __future__ import annotations

import bisect
import re
from typing import Any

_REGION_SHARE = 0.97
_ANCHOR_CHARS = 40  # a block this long (normalised) is placed by its text alone
_MAX_BLOCKS = 20_000  # a page with more blocks than this keeps trafilatura's text as it is (cost)
_BOILER_TAGS = {"nav", "header", "footer", "aside", "form", "menu"}
_BOILER_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar"}
_BOILER_NAMES = re.compile(r"(?:^|[\s_-])(?:nav|navbar|navigation|menu|megamenu|breadcrumbs?|share|sharing|social|"
                           r"cookies?|consent|advert|ads?|ad-slot|promo|sponsored|newsletter|subscribe|sidebar|"
                           r"footer|skip|related|recommended|comments?|popup|modal)(?:$|[\s_-])", re.IGNORECASE)
_LINK_HEAVY = 0.5


def norm(text: str) -> str:
    """Lower case, whitespace collapsed, cell separators gone: a row's cells match however the walk split them."""
    return " ".join(word for word in text.split() if word != "|").lower()


def recover(kept: list[tuple[str, int | None]], title: str | None, page_root,
            walk) -> list[tuple[str, int | None]]:
    """`kept` (trafilatura's blocks, with heading levels) with the main region's dropped blocks put back.

    `walk(root)` returns the page's blocks as (text, heading level or None, owning element).
    """
    blocks = walk(page_root)
    if not kept or len(blocks) > _MAX_BLOCKS:
        return kept
    parts = ([norm(title)] if title else []) + [norm(text) for text, _ in kept]
    offset = 1 if title else 0
    placed = [where - offset if where is not None else None for where in _place(blocks, parts)]
    region = _region(blocks, placed)
    if region is None:
        return kept
    after: dict[int, list[tuple[str, int | None]]] = {}
    heavy: dict = {}  # owner -> mostly links? (computed once per element: a container owns many blocks)
    cursor = -1
    for (text, level, owner), where in zip(blocks, placed):
        if where is not None:
            cursor = max(cursor, where)
        elif _inside(owner, region) and not _boilerplate(owner, region, heavy):
            after.setdefault(cursor, []).append((text, level))
    if not after:
        return kept
    merged = list(after.get(-1, []))
    for index, block in enumerate(kept):
        merged.append(block)
        merged.extend(after.get(index, []))
    return merged


def _place(blocks, parts: list[str]) -> list[int | None]:
    """Per page block, the index in `parts` of the kept block holding its text; None when it was dropped.

    A long block (an anchor) is looked for anywhere; a short one ("April 11, 2015") only between the kept
    blocks its neighbouring anchors landed in, so a date or a label that recurs further down the article
    does not pass for the one trafilatura dropped up here.
    """
    joined, starts = _joined(parts)
    found: list[int | None] = []
    for text, _, _ in blocks:
        wanted = norm(text)
        if len(wanted) >= _ANCHOR_CHARS:
            at = joined.find(wanted)
            found.append(None if at < 0 else bisect.bisect_right(starts, at) - 1)
        else:
            found.append(-1)  # short: decided below, between its anchors
    anchors = [i for i, where in enumerate(found) if where is not None and where >= 0]
    for i, where in enumerate(found):
        if where != -1:
            continue
        k = bisect.bisect_left(anchors, i)
        low = found[anchors[k - 1]] if k else 0
        high = found[anchors[k]] if k < len(anchors) else len(parts) - 1
        if low is None or high is None or high < low:
            low, high = 0, len(parts) - 1
        end = starts[high + 1] if high + 1 < len(starts) else len(joined)
        wanted = norm(blocks[i][0])
        at = joined.find(wanted, starts[low], end) if wanted else starts[low]
        found[i] = None if at < 0 else bisect.bisect_right(starts, at) - 1
    return found


def _joined(parts: list[str]) -> tuple[str, list[int]]:
    starts, position = [], 0
    for part in parts:
        starts.append(position)
        position += len(part) + 1
    return " ".join(parts), starts


def _region(blocks: list, placed: list[int | None]) -> Any:
    """The deepest element whose found blocks hold `_REGION_SHARE` of the found text; None when nothing was found."""
    weight: dict = {}
    total = 0
    for (text, level, owner), where in zip(blocks, placed):
        headline = where == -1 and level is not None  # the heading that reads as the page's title
        if where is None or owner is None or (len(norm(text)) < _ANCHOR_CHARS and not headline):
            continue  # short blocks ("Disclaimer") may match by chance: anchors and the headline say where it lies
        total += len(text)
        node = owner
        while node is not None:
            weight[node] = weight.get(node, 0) + len(text)
            node = node.getparent()
    if not total:
        return None
    best, best_depth = None, -1
    for node, held in weight.items():
        if held >= _REGION_SHARE * total:
            depth = sum(1 for _ in node.iterancestors())
            if depth > best_depth:
                best, best_depth = node, depth
    return best


def _inside(owner, region) -> bool:
    node = owner
    while node is not None:
        if node is region:
            return True
        node = node.getparent()
    return False


def _boilerplate(owner, region, heavy: dict) -> bool:
    """Whether a dropped block is navigation, a banner, an ad slot... rather than text of the article."""
    node = owner
    while node is not None:
        if _looks_boilerplate(node):
            return True
        if node is region:
            break
        node = node.getparent()
    if owner not in heavy:
        text = sum(_letters(piece) for piece in owner.itertext())
        links = sum(_letters(piece) for a in owner.iter("a") for piece in a.itertext())
        heavy[owner] = text > 0 and links > _LINK_HEAVY * text
    return heavy[owner]


def _letters(text: str) -> int:
    return len(text) - sum(text.count(space) for space in (" ", "\n", "\t", "\r"))


def _looks_boilerplate(node) -> bool:
    tag = node.tag.lower() if isinstance(node.tag, str) else ""
    if tag in _BOILER_TAGS or (node.get("role") or "").lower() in _BOILER_ROLES:
        return True
    names = f"{node.get('class') or ''} {node.get('id') or ''}"
    return bool(_BOILER_NAMES.search(names))
