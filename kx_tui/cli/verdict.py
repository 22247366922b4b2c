"""How an ingest ends: which refusals fail the command (a non-zero exit) and which are only reported; and what
`ingest --json` says when a signal stopped it.

The rule (README "Exit codes"), one for `kx datasets ingest` with or without
--sync:

- a file found by walking a folder that is refused (encrypted, unsupported,
  unreadable) is reported (one stderr line, counted in `refused`) and does
  not fail the command: a nightly `ingest docs ./docs --sync` under `set -e`
  must not fail forever because of one file nobody can read;
- a file named explicitly (`--file`, a path that is a file, `--text`,
  `--jsonl`) that is refused fails the command, as before;
- `--strict` makes every refusal fail it;
- a command that stored nothing (every document refused) fails whatever the
  source.

Two files of one command that would share a name (refuse_name_clashes) fail it as a named file does:
that is the command's shape, not a file nobody can read.

The watcher follows the same rule: a refused file in a batch is reported and
counted, and the watch goes on (it exits 0 when stopped).
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Any, Sequence

from engine.errors import KxError, Status
from engine.records import DocumentResult, DocumentStatus, IngestReport
from engine.text.inputs import DocumentInput

if TYPE_CHECKING:
    from .stopping import Interrupted


def failing_refusals(report: IngestReport, docs: Sequence[DocumentInput], from_walk: Sequence[bool],
                     strict: bool) -> list[DocumentResult]:
    """The refusals that fail this ingest (empty: it exits 0), by the rule above.

    The report's results come in the order of `docs`; a result whose name does not match its document (a
    backend that reordered them) counts as named explicitly, so a doubt fails rather than passes.
    """
    refused = [r for r in report.results if r.status == DocumentStatus.REFUSED]
    if strict or len(refused) == len(report.results):
        return refused
    aligned = len(report.results) == len(docs)
    return [r for i, r in enumerate(report.results) if r.status == DocumentStatus.REFUSED
            and not (aligned and from_walk[i] and docs[i].name == r.name)]


def failure(name: str, report: IngestReport, failing: list[DocumentResult], retired: int) -> KxError:
    """The error an ingest ends with when `failing` is not empty: the first refusal's status, and counts."""
    refused = report.count(DocumentStatus.REFUSED)
    first = Status[failing[0].code or "INVALID_ARGUMENT"]
    if refused == len(report.results):
        rest = "nothing was ingested"
    else:
        rest = "the others were ingested"
        if len(failing) < refused:
            rest += (f"; {len(failing)} of them named explicitly (files found in a folder are reported, "
                     "not failed, unless --strict)")
    if retired:   # said, as a refusal must not read as "nothing changed"
        rest += f"; {retired} document(s) whose files are gone were retired"
    return KxError(first, f"{refused} of {len(report.results)} document(s) refused; {rest} (see the reasons above)")


def stopped_report(name: str, seen: list[DocumentResult], given: int, stopped: Interrupted) -> dict[str, Any]:
    """`ingest --json`'s answer when a signal stopped it: the report's counts and results for the documents
    that got one (the added ones are committed and stay), how many got none, and the stop itself."""
    def count(status: DocumentStatus) -> int:
        return sum(r.status == status for r in seen)

    return {"dataset": name, "stopped": True, "signal": signal.Signals(stopped.signum).name, "code": "CANCELLED",
            "message": stopped.message, "added": count(DocumentStatus.ADDED),
            "unchanged": count(DocumentStatus.UNCHANGED), "refused": count(DocumentStatus.REFUSED),
            "passages_added": sum(r.passages for r in seen if r.status == DocumentStatus.ADDED),
            "not_reached": given - len(seen), "results": [r.to_dict() for r in seen]}
