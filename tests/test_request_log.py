"""The end-to-end half of tests/unit/test_request_log.py (a model, processes or servers there):
The line per request that `kx serve` (and `kx mcp --http`) write on stderr.
"""

from __future__ import annotations

import json

import pytest

from .test_gateway import _start, _stop
from .unit.test_request_log import LINE  # noqa: F401 - helpers and fixtures


@pytest.mark.slow
def test_kx_serve_logs_by_default_json_on_request_and_nothing_when_quiet(tmp_path) -> None:
    seen = {}
    for flags in ((), ("--log-json",), ("--quiet",)):
        gw = _start(tmp_path / "-".join(flags or ("plain",)) / "home", *flags, env={"KX_SERVE_EMBED_MODEL": "none"})
        try:
            with gw.client() as client:
                client.list_datasets()
        finally:
            assert _stop(gw) == 0
        seen[flags] = [line for line in gw.log.read_text().splitlines() if "/v1/" in line and "http://" not in line]
    assert any(LINE.match(line) and " GET /v1/datasets 200 " in line for line in seen[()])
    records = [json.loads(line) for line in seen[("--log-json",)]]
    assert {"method": "GET", "path": "/v1/datasets", "status": 200} in [
        {k: r[k] for k in ("method", "path", "status")} for r in records]
    assert seen[("--quiet",)] == []
