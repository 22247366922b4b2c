"""`kx datasets query`'s options, derived from the engine's one declaration (engine/records.py QueryOptions).

Each option a person types (not a pre-computed vector) becomes a click option with the declaration's
description; `CLI_FORMS` names the few that read better in a shell's own spelling than in their Python
type's (`--rerank on|off`, `-k`, a mode or a view chosen from its values). An option added to QueryOptions
becomes a click option from its type (a bool a `--x/--no-x` flag, a list a repeatable option) with no line
here, and tests/test_query_options.py holds every field to an option.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any, Callable, Union, cast, get_args, get_origin

import click

from engine.config import option_help
from engine.records import QueryOptions, RetrievalMode, VersionView, described

ON_OFF = ("on", "off")
ON_OFF_OPTIONS = ("rerank",)  # a setting's on/off, as `--set rerank=off` spells it, for a bool


def _choice(values: Sequence[str]) -> dict[str, Any]:
    return {"type": click.Choice(list(values), case_sensitive=False)}


# an option's shell spelling, where its Python type alone would not give it: (flags, click keywords)
CLI_FORMS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "k": (("--k", "-k"), {"type": int}),
    "mode": (("--mode",), _choice(list(RetrievalMode))),
    "rerank": (("--rerank",), _choice(ON_OFF)),
    "where": (("--where",), {"multiple": True, "metavar": "KIND:VALUE"}),
    "versions": (("--versions",), _choice(list(VersionView))),
}


def _plain(kind: Any) -> Any:
    """`X | None` -> X."""
    if get_origin(kind) in (Union, types.UnionType):
        kept = [arg for arg in get_args(kind) if arg is not type(None)]
        return kept[0] if len(kept) == 1 else kind
    return kind


def _from_type(name: str, kind: Any) -> tuple[tuple[str, ...], dict[str, Any]]:
    """A click option from an option's Python type: a bool a --x/--no-x flag, a sequence repeatable."""
    flag = "--" + name.replace("_", "-")
    plain = _plain(kind)
    if plain is bool:
        return (f"{flag}/--no-{flag[2:]}",), {}
    if get_origin(plain) in (list, tuple, Sequence):
        return (flag,), {"multiple": True}
    return (flag,), {"type": plain if plain in (int, float) else str}


def typed_options() -> dict[str, Any]:
    """The QueryOptions fields a person types (their types), in declaration order."""
    return {name: kind for name, (kind, doc) in described(QueryOptions).items()
            if not (doc is not None and doc.programs_only)}


def query_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a click command with one option per typed QueryOptions field (all default None: unset)."""
    docs = {name: doc for name, (_, doc) in described(QueryOptions).items()}
    for name, kind in reversed(typed_options().items()):  # click lists options in decorator order
        flags, keywords = CLI_FORMS.get(name) or _from_type(name, kind)
        command = click.option(*flags, name, default=None, help=option_help(docs[name]), **keywords)(command)
    return command


def engine_options(given: dict[str, Any]) -> QueryOptions:
    """What the command's options hold, as QueryOptions: unset ones left out (the settings decide), a
    repeated option a list, on/off a bool, a choice in lower case."""
    options: dict[str, Any] = {}
    for name in typed_options():
        value = given.get(name)
        if value is None or value == ():
            continue
        if isinstance(value, tuple):  # a repeated option
            value = list(value)
        elif name in ON_OFF_OPTIONS:
            value = str(value).lower() == "on"
        elif isinstance(value, str) and name in CLI_FORMS:  # a choice, as typed
            value = value.lower()
        options[name] = value
    return cast(QueryOptions, options)
