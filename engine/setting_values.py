"""What a setting's raw text may say: the parsers that turn it into a typed value, each raising ValueError with
the words `load_settings` puts in front of the user (engine/config.py declares which setting uses which)."""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import Any, Callable

from .records import RetrievalMode

_TRUE = {"on", "true", "yes", "1"}
_FALSE = {"off", "false", "no", "0"}


def on_off(text: str) -> bool:
    low = text.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError("expected on or off")


def int_in(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text.strip())
        if not low <= value <= high:
            raise ValueError(f"expected an integer from {low} to {high}")
        return value

    return parse


def float_in(low: float, high: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = float(text.strip())
        if not low <= value <= high:  # also rejects NaN
            raise ValueError(f"expected a number from {low} to {high}")
        return value

    return parse


def retrieval_mode(text: str) -> RetrievalMode:
    return RetrievalMode.parse(text)


def plain_text(text: str) -> str:
    value = text.strip()
    if not value:
        raise ValueError("expected a non-empty value")
    return value


SERVED_PREFIX = "openai:"
_SERVED = re.compile(r"^openai:(?P<model>[^\s]+?)@(?P<urls>https?://\S+)$", re.I)


def served_model(text: str) -> tuple[str, tuple[str, ...]] | None:
    """(model name, base URLs) for 'openai:MODEL@URL[,URL...]', None for any other embed_model value.

    ValueError for a value that starts 'openai:' but is not that shape, or names a URL with a password in it
    (the key comes from KX_EMBED_API_KEY, never from a setting that `kx info` or a shell history shows).
    """
    value = text.strip()
    if not value.lower().startswith(SERVED_PREFIX):
        return None
    found = _SERVED.match(value)
    expected = ("expected openai:MODEL@BASE_URL (e.g. openai:nomic-embed-text@http://127.0.0.1:11434/v1), "
                "several base URLs comma-separated")
    if found is None:
        raise ValueError(expected)
    urls = tuple(u.strip().rstrip("/") for u in found["urls"].split(","))
    for url in urls:
        if not re.match(r"^https?://[^/\s@,]+(/\S*)?$", url, re.I):
            raise ValueError(f"{expected}; {url!r} is not an http(s) base URL without a user or password "
                             "(the key goes in the environment variable KX_EMBED_API_KEY)")
    if len(set(urls)) != len(urls):
        raise ValueError(f"{expected}; a URL is named twice")
    return found["model"], urls


def embed_model(text: str) -> str:
    value = plain_text(text)
    served_model(value)  # a malformed served spelling is refused when the setting is read
    return value


def path(text: str) -> Path:
    return Path(plain_text(text)).expanduser()


def path_or_empty(text: str) -> Path | None:
    value = text.strip()
    return Path(value).expanduser() if value else None


def one_of(kind: type[StrEnum]) -> Callable[[str], Any]:
    def parse(text: str) -> StrEnum:
        try:
            return kind(text.strip().lower())
        except ValueError:
            raise ValueError("expected one of " + ", ".join(kind)) from None

    return parse




def url_or_empty(text: str) -> str:
    value = text.strip()
    if value and not value.startswith(("http://", "https://")):
        raise ValueError("expected an http:// or https:// address, or nothing for in-process")
    return value


def origins(text: str) -> tuple[str, ...]:
    """Comma-separated web origins (scheme://host[:port]), as a browser sends them in Origin."""
    out = []
    for item in (part.strip().rstrip("/").lower() for part in text.split(",")):
        if not item:
            continue
        scheme, sep, rest = item.partition("://")
        if scheme not in ("http", "https") or not sep or not rest or "/" in rest:
            raise ValueError(f"expected origins like http://localhost:3000, comma-separated; {item!r} is not one")
        out.append(item)
    return tuple(out)


def host_names(text: str) -> tuple[str, ...]:
    """Comma-separated host names (no ports), lowercased."""
    out = []
    for item in (part.strip().lower() for part in text.split(",")):
        if not item:
            continue
        if "/" in item or " " in item:
            raise ValueError(f"expected host names like kx.lan, comma-separated; {item!r} is not one")
        out.append(item)
    return tuple(out)


def milvus_uri(text: str) -> str:
    """A Milvus address (http(s)://host:port) or a local milvus-lite path, which must end in .db."""
    value = text.strip()
    if not value or value.startswith(("http://", "https://")):
        return value
    if "://" in value or not value.endswith(".db"):
        raise ValueError("expected http(s)://host:port for a Milvus server, or a local path ending in .db "
                         "for milvus-lite")
    return str(Path(value).expanduser())


def milvus_database(text: str) -> str:
    value = text.strip()
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,254}", value):
        raise ValueError("expected a Milvus database name: letters, digits and '_', not starting with a digit")
    return value


def chat_url(text: str) -> str:
    value = text.strip()
    if value and not value.startswith(("http://", "https://")):
        raise ValueError("expected an http:// or https:// address, or nothing for the offline brain")
    return value.rstrip("/")
