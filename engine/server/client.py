"""KxClient: the Python SDK for `kx serve`, and the CLI's HTTP Backend.

It speaks the gateway's /v1 JSON API and hands back the engine's own records
(Hit, QueryResult, IngestReport, DatasetSummary), rebuilt from the JSON, and
raises the engine's own `KxError` with the status the server named. So code
written against `Backend` works the same in-process and over HTTP.

httpx is imported when the first client is made, not with `engine`.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from ..errors import KxError, Status
from ..filters import spelled
from ..records import (
    DatasetSummary,
    DocumentResult,
    DocumentStatus,
    DocumentSummary,
    EmbedReport,
    IngestReport,
    Notice,
    PassageSpan,
    QueryOptions,
    QueryResult,
    RetrievalMode,
)
from ..records import IngestEventFn as EventFn
from ..text.inputs import DocumentInput, from_bytes, from_text, with_a_storable_name
from ..text.kx_files import TOKEN_FILE

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..agent_run import AgentRun, Step

DEFAULT_URL = "http://127.0.0.1:50151"


def token_path(home: Path | str) -> Path:
    """Where `kx serve` keeps its bearer token: $KX_HOME/gateway.token."""
    return Path(home) / TOKEN_FILE


def read_token(home: Path | str) -> str | None:
    """The gateway token kept under `home`, or None when there is none (yet)."""
    try:
        token = token_path(home).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise token_is_a_folder(home) from None
    except OSError as exc:
        raise KxError(Status.FAILED_PRECONDITION,
                      f"cannot read {token_path(home)} ({exc.strerror}); fix its permissions") from None
    return token or None


def token_is_a_folder(home: Path | str) -> KxError:
    """The token file's place holds a folder: no permission change fixes that (a chmod hint misled)."""
    path = token_path(home)
    return KxError(Status.FAILED_PRECONDITION,
                   f"{path} is a folder, not the gateway's token file; move it out of the way (kx serve or "
                   "kx mcp --http writes a new token there at its next start, and clients then read that one)")


class KxClient:
    """A `kx serve` gateway, as a Backend.

    `timeout` bounds each request in seconds (None: wait as long as it takes;
    a large ingest is embedded while the request is open).
    """

    def __init__(self, url: str = DEFAULT_URL, token: str | None = None, *, timeout: float | None = 600.0) -> None:
        import httpx  # deferred: `import engine` stays light

        self.url = url.rstrip("/")
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(base_url=self.url, headers=headers,
                                  timeout=httpx.Timeout(timeout, connect=min(timeout or 10.0, 10.0)))

    def __enter__(self) -> KxClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # -- the SDK's own face ---------------------------------------------------------

    def ingest_documents(
        self,
        name: str,
        documents: Sequence[bytes | str],
        vectors: Sequence[Sequence[float]] | Any | None = None,
        names: Sequence[str | None] | None = None,
        media_types: Sequence[str | None] | None = None,
    ) -> IngestReport:
        """Add texts (str) or raw bytes to dataset `name`; with `vectors`, one per document.

        `media_types` says how to read each document's bytes ("application/pdf",
        "text/markdown", ...; None or absent: text/plain), one per document.
        """
        for what, given in (("names", names), ("media_types", media_types)):
            if given is not None and len(given) != len(documents):
                raise KxError(Status.INVALID_ARGUMENT, f"{what}: expected {len(documents)}, got {len(given)}")
        docs = []
        for i, item in enumerate(documents):
            label = names[i] if names is not None else None
            media = (media_types[i] if media_types is not None else None) or "text/plain"
            if isinstance(item, str):
                docs.append(dataclasses.replace(from_text(item, label), media_type=media))
            elif isinstance(item, (bytes, bytearray, memoryview)):
                docs.append(from_bytes(bytes(item), label, media))
            else:
                raise KxError(Status.INVALID_ARGUMENT,
                              f"document {i} is a {type(item).__name__}; pass str or bytes")
        return self.ingest(name, docs, vectors)

    def query_dataset(self, name: str, text: str | None = None, **options: Unpack[QueryOptions]) -> QueryResult:
        """Query with `where` filters (["type:pdf", "name:guide/*"]), `versions` ("latest" or "all") and
        `expand` (pseudo-relevance feedback): any QueryOptions field (engine/records.py). Whatever is not
        given is the server's: `k` its default_k, `mode` its default_mode, `rerank` its rerank, `expand` its
        query_expansion setting."""
        return self.query(name, text, **options)

    def run_agent(self, goal: str, dataset: str | None = None, max_steps: int | None = None,
                  on_step: Callable[[Step], None] | None = None) -> AgentRun:
        """Run the agent on the gateway (POST /v1/agent/runs): its transcript and cited answer.

        The run happens where the engine is, bounded by the gateway's
        KX_AGENT_* settings (`max_steps` can only tighten them); `on_step`
        hears each step once the run is over (the gateway answers whole).
        """
        from ..agent_run import AgentRun

        body: dict[str, Any] = {"goal": goal}
        if dataset is not None:
            body["dataset"] = dataset
        if max_steps is not None:
            body["max_steps"] = max_steps
        run = AgentRun.from_dict(self._call("POST", "/v1/agent/runs", body))
        for step in run.steps:
            if on_step is not None:
                on_step(step)
        return run

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/v1/health")

    # -- Backend ------------------------------------------------------------------------

    def list_datasets(self) -> list[DatasetSummary]:
        return [DatasetSummary(**d) for d in self._call("GET", "/v1/datasets")["datasets"]]

    def dataset_summary(self, name: str) -> DatasetSummary:
        return DatasetSummary(**_known(DatasetSummary, self._call("GET", f"/v1/datasets/{_segment(name)}")))

    def info(self) -> dict[str, Any]:
        return self._call("GET", "/v1/info")

    def embed(self, name: str, on_event: EventFn | None = None) -> EmbedReport:
        """Have the gateway finish the dataset's embedding backlog; how many passages that embedded."""
        data = self._call("POST", f"/v1/datasets/{_segment(name)}/embed")
        return EmbedReport(DatasetSummary(**_known(DatasetSummary, data)), int(data.get("embedded", 0)))

    def document_text(self, name: str, doc_ref: str) -> str:
        """A document's text, as its passages' character ranges refer to it."""
        return self._call("GET", f"/v1/datasets/{_segment(name)}/documents/{_segment(doc_ref)}")["text"]

    def list_documents(self, name: str, offset: int = 0, limit: int = 100,
                       versions: str | None = None) -> list[DocumentSummary]:
        view = "" if versions is None else f"&versions={_segment(str(versions))}"
        data = self._call("GET", f"/v1/datasets/{_segment(name)}/documents?offset={int(offset)}&limit={int(limit)}"
                                 f"{view}")
        return [DocumentSummary(**{**_known(DocumentSummary, d), "notes": tuple(d.get("notes") or ())})
                for d in data["documents"]]

    def document_passages(self, name: str, doc_ref: str) -> list[PassageSpan]:
        data = self._call("GET", f"/v1/datasets/{_segment(name)}/documents/{_segment(doc_ref)}/passages")
        return [PassageSpan(**_known(PassageSpan, p)) for p in data["passages"]]

    def warm_up(self, dataset: str | None = None, notify: Callable[[str], None] | None = None) -> bool:
        return False  # the gateway loads its own model and indexes; there is nothing to load on this side

    def ingest(
        self,
        name: str,
        documents: Iterable[DocumentInput],
        vectors: Sequence[Sequence[float]] | Any | None = None,
        on_event: EventFn | None = None,
    ) -> IngestReport:
        """Send the documents' bytes in one request; report and events as the engine gives them.

        Documents the caller already could not read (their `error` is set)
        are not sent; they are refused in the report at their own place, as
        the in-process engine does.
        """
        emit = on_event or (lambda _event: None)
        # a name the gateway's schema refuses would fail the whole request: refused here alone, as the engine does
        docs = [with_a_storable_name(doc) for doc in documents]
        rows = None if vectors is None else _vector_rows(vectors)
        if rows is not None and len(rows) != len(docs):
            raise KxError(Status.INVALID_ARGUMENT,
                          f"one vector per document: expected {len(docs)} list(s) of numbers, got {len(rows)}")
        sent = [i for i, d in enumerate(docs) if d.error is None]
        payload = []
        for i in sent:
            doc = docs[i]
            item: dict[str, Any] = {"name": doc.name, "data_base64": base64.b64encode(doc.data).decode("ascii"),
                                    "media_type": doc.media_type}
            if doc.source_path is not None:
                item["source_path"] = doc.source_path
            if rows is not None:
                item["vector"] = rows[i]
            payload.append(item)
        remote, refused = None, []
        if payload:
            data = self._call("POST", f"/v1/datasets/{_segment(name)}/documents", {"documents": payload},
                              refusals=True)
            if "code" in data:  # every document refused: the gateway's 4xx lists each one, and nothing was stored
                refused = [_document_result(r) for r in data["results"]]
            else:
                remote = _ingest_report(data)
        if remote is not None:
            created, documents_total, passages_total = remote.created, remote.documents, remote.passages
            advisories, answers = remote.advisories, iter(remote.results)
        else:  # nothing readable, or nothing taken: the dataset's totals are what they were
            try:
                summary = self.dataset_summary(name)
                # the documents stored, as an ingest counts them (a gateway from before `versions`: the current)
                documents_total = summary.documents if summary.versions is None else summary.versions
                passages_total = summary.passages
            except KxError as exc:
                if exc.status is not Status.NOT_FOUND:
                    raise
                documents_total = passages_total = 0
            # a refusal is a result in the report, as the engine gives it, not an exception
            created, advisories, answers = False, [], iter(refused)
        sent_set = set(sent)
        results = [next(answers) if i in sent_set else _local_refusal(d) for i, d in enumerate(docs)]
        for advisory in advisories:
            emit(Notice("advisory", advisory))
        # The engine reports refused and unchanged documents while it sorts the
        # input, and added ones as they commit: replay that order.
        for result in results:
            if result.status != DocumentStatus.ADDED:
                emit(result)
        for result in results:
            if result.status == DocumentStatus.ADDED:
                emit(result)
        return IngestReport(name, results, created, documents_total, passages_total, list(advisories))

    def query(self, name: str, text: str | None = None, **options: Unpack[QueryOptions]) -> QueryResult:
        unknown = set(options) - set(QueryOptions.__annotations__)
        if unknown:  # as a Python call with a wrong keyword would say, before anything is sent
            raise TypeError(f"query() got unexpected keyword argument(s): {', '.join(sorted(unknown))}")
        body: dict[str, Any] = {} if text is None else {"text": text}
        for key, value in options.items():
            if value is not None:  # absent: the server's own default (default_k, default_mode, rerank, ...)
                body[key] = _WIRE_FORMS.get(key, _as_is)(value)
        return QueryResult.from_dict(self._call("POST", f"/v1/datasets/{_segment(name)}/query", body))

    # -- transport ----------------------------------------------------------------------

    def _call(self, method: str, path: str, body: Any = None, refusals: bool = False) -> Any:
        """The answer's JSON; a KxError for a refusal, except with `refusals` one that lists `results`."""
        import httpx

        content = None
        headers = {}
        if body is not None:
            # Our own encoding: httpx refuses NaN client-side, and the server
            # is the one place that says what is wrong with a vector.
            content = json.dumps(body, separators=(",", ":")).encode("utf-8")
            headers["Content-Type"] = "application/json"
        try:
            response = self._http.request(method, path, content=content, headers=headers)
        except httpx.TimeoutException:
            raise KxError(Status.UNAVAILABLE, f"the gateway at {self.url} did not answer in time; "
                                              "check it is running, or raise the client's timeout") from None
        except httpx.TransportError as exc:
            raise KxError(Status.UNAVAILABLE, f"cannot reach the gateway at {self.url} ({type(exc).__name__}: "
                                              f"{exc}); start it with `kx serve` or check --gateway") from None
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.is_success and data is not None:
            return data
        if refusals and response.is_client_error and isinstance(data, dict) and isinstance(data.get("results"), list):
            return data
        raise _error_from(response.status_code, data, response.text)


def _as_is(value: Any) -> Any:
    return value


# An option's Python value in the JSON body, where JSON has no form for it as given: a vector may be a numpy
# array; a filter goes in the schema's one spelling ('type:PDF' means to the gateway what it means
# in-process). Every other option goes as it is (a mode or a view is a str enum: a JSON string).
_WIRE_FORMS: dict[str, Callable[[Any], Any]] = {
    "vector": lambda vector: _vector_rows([vector])[0],
    "where": lambda where: [spelled(c) for c in ([where] if isinstance(where, str) else where)],
}


def _error_from(http_status: int, data: Any, text: str) -> KxError:
    if isinstance(data, dict) and isinstance(data.get("code"), str) and data["code"] in Status.__members__:
        return KxError(Status[data["code"]], str(data.get("message", "")))
    by_http = {s.http_status: s for s in Status}
    status = by_http.get(http_status, Status.INTERNAL if http_status >= 500 else Status.INVALID_ARGUMENT)
    return KxError(status, f"the gateway answered HTTP {http_status} without a kx error body: {text[:200]!r}")


def _segment(name: str) -> str:
    from urllib.parse import quote

    # quoted whole, so a name can never walk to another route; the server checks it
    return quote(str(name), safe="")


def _vector_rows(vectors: Any) -> list[list[float]]:
    try:
        import numpy as np

        array = np.asarray(vectors, dtype=np.float64)
    except (TypeError, ValueError):
        raise KxError(Status.INVALID_ARGUMENT, "vectors: expected lists of numbers, all of one length") from None
    if array.ndim != 2:
        raise KxError(Status.INVALID_ARGUMENT, f"vectors: expected lists of numbers; got shape {array.shape}")
    return array.tolist()  # NaN stays NaN: the server says what is wrong with it


def _local_refusal(doc: DocumentInput) -> DocumentResult:
    error = doc.error
    assert error is not None
    return DocumentResult(doc.name, DocumentStatus.REFUSED, None, 0, doc.source_path, error.status.name, error.message)


def _document_result(data: dict[str, Any]) -> DocumentResult:
    return DocumentResult(**{**_known(DocumentResult, data), "status": DocumentStatus(data["status"])})


def _ingest_report(data: dict[str, Any]) -> IngestReport:
    results = [_document_result(r) for r in data["results"]]
    return IngestReport(data["dataset"], results, data["created"], data["documents"], data["passages"],
                        list(data.get("advisories", [])))


def _known(record: Any, data: dict[str, Any]) -> dict[str, Any]:
    """The fields of `data` that `record` (a dataclass) has: a newer server may send more."""
    fields = record.__dataclass_fields__
    return {k: v for k, v in data.items() if k in fields}


__all__ = ["DEFAULT_URL", "KxClient", "RetrievalMode", "read_token", "token_path"]
