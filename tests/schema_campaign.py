"""Schemathesis against the gateway: every operation, schema-valid requests, the checks that matter here.

Shared by tests/test_gateway.py (a slice) and benchmarks/schemathesis_gateway.py
(>= 100 examples per operation). The app is the real gateway (engine/server/gateway.py)
over a real engine with the tiny deterministic embedder, called in-process
through ASGI. Two datasets exist ("fuzz": text, "vecs": two-dimensional
vectors); a generated dataset name is replaced by one of them some of the
time, so requests reach past the name check into the engine.

Checks, on positive (schema-valid) requests:
- not_a_server_error: no HTTP 5xx;
- positive_data_acceptance: a schema-valid request is not rejected
  (400/412/413/422 count as rejections; 404 for an unknown name does not);
- status_code_conformance and response_schema_conformance: the answer is
  one the schema declares;
- our own: every refusal is {code, message} with the status's HTTP code (and `results` for an
  ingest whose every document was refused).

A rejection that depends on stored state rather than the request's shape
(a vector whose length is not the dataset's dimension, a dataset made with
another model, an agent run without a dataset on a gateway with no chat
model) or on a rule between items that JSON Schema cannot state (every
document's vector of one length) is counted apart as `state_dependent`:
the schema cannot state it, the message names it.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

DATASETS = ("fuzz", "vecs")
DOCS = ("The parking garage opens at seven.", "Refunds are paid within 30 days.", "The VPN needs a token.")

# Rejections the schema cannot express: they depend on what the named dataset holds or on the model.
_STATE_MARKERS = ("dimensions but dataset", "dimensional vectors but", "different embed model",
                  "under other index settings", "no embedding model", "holds no documents", "has no model",
                  "was made with", "chat model")
# Rules between fields of different items that JSON Schema cannot state (said in the field's description), and
# what a document's bytes hold (empty, not UTF-8, not the PDF they claim): each such document is refused alone,
# and an ingest that stores nothing because every one was answers that refusal (engine/server/gateway.py).
_INEXPRESSIBLE_MARKERS = ("all of one length", "must be a calendar day", "1 <= A <= B", "every document was refused",
                         "are both named",  # two documents of one name in one request: JSON Schema cannot say it
                         "both read by OCR and not")  # where: ocr:yes beside ocr:no


@dataclass
class CampaignResult:
    examples: Counter = field(default_factory=Counter)             # per operation
    statuses: dict[str, Counter] = field(default_factory=dict)     # per operation: HTTP status -> count
    server_errors: list[str] = field(default_factory=list)
    rejected_valid: list[str] = field(default_factory=list)        # schema-valid, refused for its shape
    state_dependent: Counter = field(default_factory=Counter)      # schema-valid, refused for stored state
    nonconforming: list[str] = field(default_factory=list)         # status or body not as the schema says
    bad_errors: list[str] = field(default_factory=list)            # a refusal not shaped {code, message}


def build_app(home_settings: dict[str, Any] | None = None):
    from engine import Engine, load_settings
    from engine.server.gateway import create_app
    from engine.text.inputs import from_text

    from .helpers import HashEmbedder

    engine = Engine(load_settings({"chunk_size": 200, "chunk_overlap": 40, **(home_settings or {})}),
                    embedder=HashEmbedder())
    engine.ingest("fuzz", [from_text(t) for t in DOCS])
    engine.ingest("vecs", [from_text("a"), from_text("b")], vectors=[[1, 0], [0, 1]])
    # in-process clients send Host: testserver; name it, as an operator would name a LAN host
    app = create_app(engine, "fuzz-token", max_request_bytes=1 << 20, allowed_hosts=["testserver"])
    return engine, app


def run_campaign(app: Any, examples: int, seed: int = 0) -> CampaignResult:
    import schemathesis
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import (
        positive_data_acceptance,
        response_schema_conformance,
        status_code_conformance,
    )

    from engine.errors import Status

    auth = {"Authorization": "Bearer fuzz-token"}
    schema = schemathesis.openapi.from_asgi("/openapi.json", app, headers=auth)
    result = CampaignResult()
    checks = [not_a_server_error, positive_data_acceptance, status_code_conformance, response_schema_conformance]
    rng = random.Random(seed)
    for operation_result in schema.get_all_operations():
        operation = operation_result.ok()
        label = operation.label
        result.statuses[label] = Counter()

        @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck),
                  derandomize=True)
        @given(case=operation.as_strategy(), named=st.sampled_from([None, *DATASETS]))
        def probe(case, named) -> None:
            if named and case.path_parameters and "name" in case.path_parameters:
                case.path_parameters["name"] = named  # reach past the name check into the engine
            random.seed(rng.random())  # whoosh names segments with `random`, which hypothesis reseeds
            result.examples[label] += 1
            shown = f"{case.method} {case.formatted_path} {str(case.query or '')[:80]} {str(case.body)[:160]}"
            response = case.call(headers=auth)
            try:
                case.validate_response(response, checks=checks)
            except (Exception, BaseExceptionGroup) as failure:  # one group (a BaseExceptionGroup) naming each check
                _classify(result, label, shown, response, failure)
            result.statuses[label][response.status_code] += 1
            if response.status_code >= 400:
                try:
                    body = response.json()
                    # `results` too, for an ingest whose every document was refused (ErrorOut says so)
                    ok = {"code", "message"} <= set(body) <= {"code", "message", "results"} \
                        and Status[body["code"]].http_status == response.status_code
                except Exception:
                    ok = False
                if not ok:
                    result.bad_errors.append(f"{shown} -> {response.status_code} {response.text[:200]}")

        probe()
    return result


def _classify(result: CampaignResult, label: str, shown: str, response: Any, failure: BaseException) -> None:
    text = str(failure)
    line = f"{shown} -> {response.status_code} {response.text[:240]}"
    if response.status_code >= 500:
        result.server_errors.append(line)
    elif "Schema-valid request rejected" in text:
        message = ""
        try:
            message = response.json().get("message", "")
        except Exception:
            pass
        if any(marker.lower() in message.lower() for marker in _STATE_MARKERS + _INEXPRESSIBLE_MARKERS):
            result.state_dependent[f"{label}: {message[:100]}"] += 1
        else:
            result.rejected_valid.append(line)
    else:
        result.nonconforming.append(f"{line} :: {text[:300]}")


def summary(result: CampaignResult) -> str:
    lines = [f"{label}: {result.examples[label]} examples, statuses {dict(sorted(result.statuses[label].items()))}"
             for label in sorted(result.examples)]
    lines.append(f"server errors: {len(result.server_errors)}; schema-valid rejected: {len(result.rejected_valid)}; "
                 f"state-dependent refusals: {sum(result.state_dependent.values())}; "
                 f"nonconforming: {len(result.nonconforming)}; "
                 f"refusals not {{code, message}}: {len(result.bad_errors)}")
    for title, items in (("server errors", result.server_errors), ("schema-valid rejected", result.rejected_valid),
                         ("nonconforming", result.nonconforming), ("bad errors", result.bad_errors)):
        for item in items[:8]:
            lines.append(f"  {title}: {item}")
    for item, count in result.state_dependent.most_common(8):
        lines.append(f"  state-dependent x{count}: {item}")
    return "\n".join(lines)
