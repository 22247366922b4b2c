"""Dataset names: the one rule every backend, the CLI and the gateway check a name against."""

from __future__ import annotations

import re

from .errors import invalid

NAME_PATTERN = r"[a-z0-9][a-z0-9_-]{0,63}"  # the gateway's OpenAPI schema states it too
NAME_RE = re.compile(NAME_PATTERN)
NAME_RULE = "1 to 64 lowercase letters, digits, '-' or '_', starting with a letter or digit (e.g. 'handbook')"


def validate_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        shown = repr(name)[:80] if isinstance(name, str) else type(name).__name__
        raise invalid(f"dataset name {shown} is not allowed; use {NAME_RULE}")
    return name
