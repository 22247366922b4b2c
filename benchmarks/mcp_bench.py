"""`kx mcp` latency: a `search` round trip over stdio against the same query in-process, and a cold start.

    python benchmarks/mcp_bench.py [--rounds 60] [--cold 5]

(Not benchmarks/mcp.py: run as a script, that name would shadow the `mcp` package it drives.)

One temporary KX_HOME holds the shipped handbook, ingested with the bundled
model (its ONNX export is paid once, before anything is timed).

- in-process: `Engine.query` on the handbook, the same query, warmed, p50/p95;
- over stdio: a real `kx mcp` process driven by the `mcp` SDK's client, the
  `search` tool with the same arguments, warmed, p50/p95 of the round trip,
  interleaved round by round with the in-process query (same load for both)
  (the client's call to the parsed CallToolResult: JSON-RPC framing, the SDK's
  validation and worker thread, the hit serialisation, the citation text);
- cold: spawning `kx mcp` to the first answered `search` (process start,
  imports, initialize, the model's load in the server's warm-up thread), the
  median of `--cold` starts, alternated with the baseline: the same query as
  a cold `kx datasets query --json` (process start, imports, model, query).

Prints one JSON object; the ratio is stdio p50 / in-process p50 from the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, percentile

QUERY = "how long do I have to return a logger?"
ARGS = {"dataset": "handbook", "query": QUERY, "k": 8}


def _cpu() -> str:
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    simd = sorted({f for f in ("avx512_vnni", "avx512f", "avx2") if f" {f}" in flags})
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {'/'.join(simd) or 'no AVX2'}"


def _build(home: Path) -> None:
    from engine import Engine, load_settings
    from engine.text.inputs import from_file

    engine = Engine(load_settings({"home": str(home)}, env={}))
    engine.ingest("handbook", [from_file(p, 10**7) for p in sorted((REPO / "samples" / "handbook").glob("*.md"))])
    engine.close()


async def _interleaved(home: Path, rounds: int) -> tuple[list[float], list[float]]:
    """Each round: the query in-process, then the same search over stdio, so both see the same machine load."""
    from mcp import Client

    from engine import Engine, load_settings

    engine = Engine(load_settings({"home": str(home)}, env={}))
    engine.query("handbook", QUERY, k=8)  # warm: the model and the readers
    local, remote = [], []
    async with Client(_params(home), read_timeout_seconds=300) as client:
        first = await client.call_tool("search", ARGS)  # warm: the server's model and readers
        assert not first.is_error, first
        for _ in range(rounds):
            started = time.perf_counter()
            engine.query("handbook", QUERY, k=8)
            local.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            result = await client.call_tool("search", ARGS)
            remote.append((time.perf_counter() - started) * 1000)
            assert not result.is_error and result.structured_content["hits"]
    engine.close()
    return local, remote


def _params(home: Path):
    from mcp import StdioServerParameters

    env = {k: v for k, v in os.environ.items() if not k.startswith("KX_")}
    env.update({"KX_HOME": str(home), "PYTHONPATH": str(REPO)})
    return StdioServerParameters(command=sys.executable, args=["-m", "kx_tui", "mcp"], env=env, cwd=str(REPO))


async def _cold(home: Path) -> float:
    from mcp import Client

    started = time.perf_counter()
    async with Client(_params(home), read_timeout_seconds=300) as client:
        result = await client.call_tool("search", ARGS)
        elapsed = time.perf_counter() - started
        assert not result.is_error, result
    return elapsed


def _cold_cli(home: Path) -> float:
    """The baseline for the cold start: the same query as a cold `kx datasets query` (imports, model, query)."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("KX_")}
    env.update({"KX_HOME": str(home), "PYTHONPATH": str(REPO)})
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kx_tui", "datasets", "query", "handbook", "--text", QUERY, "--json"],
                   env=env, cwd=REPO, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    import anyio

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--cold", type=int, default=5)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="kx-mcp-bench-"))
    try:
        _build(home)
        local, remote = anyio.run(_interleaved, home, args.rounds)
        cold, cli = [], []
        for _ in range(args.cold):  # alternated, so both see the same load
            cold.append(anyio.run(_cold, home))
            cli.append(_cold_cli(home))
        p50_local, p50_remote = statistics.median(local), statistics.median(remote)
        print(json.dumps({
            "cpu": _cpu(), "load_average": os.getloadavg(), "rounds": args.rounds,
            "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE", ""),
            "in_process_ms": {"p50": round(p50_local, 2), "p95": round(percentile(local, 95), 2)},
            "stdio_ms": {"p50": round(p50_remote, 2), "p95": round(percentile(remote, 95), 2)},
            "stdio_over_in_process_p50": round(p50_remote / p50_local, 2),
            "cold_start_to_first_answer_s": {"median": round(statistics.median(cold), 2),
                                             "all": [round(c, 2) for c in cold]},
            "cold_cli_query_s": {"median": round(statistics.median(cli), 2), "all": [round(c, 2) for c in cli]},
            "cold_mcp_over_cold_cli": round(statistics.median(cold) / statistics.median(cli), 2),
        }, indent=2))
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
