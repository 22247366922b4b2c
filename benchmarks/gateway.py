"""The gateway under a bounded concurrent load, and its per-query overhead.

    python benchmarks/gateway.py [--requests 800] [--clients 8] [--corpus-docs 500]

1. A fresh home gets the first --corpus-docs SciFact documents (ingested
   in-process once, then copied), then `kx serve` starts on a free loopback port.
2. --clients threads, each with its own KxClient, share a fixed list of
   --requests requests: SciFact test queries (hybrid, k=10), with every 8th
   request an ingest of one new, unique document into the same dataset.
   Reported: throughput, p50/p95/p99 per kind, errors (must be 0), and
   afterwards that every ingested document is in the catalogue exactly once.
3. Overhead: the same queries one at a time through KxClient and through an
   in-process Engine on the same home, as a ratio of median latencies.

Writes benchmarks/out/gateway.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from itertools import islice
from pathlib import Path

from common import DATA, REPO, percentile

OUT = REPO / "benchmarks" / "out"
HOME = OUT / "gateway-home"
DATASET = "bench"
INGEST_EVERY = 8


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _queries() -> list[str]:
    with (DATA / "scifact" / "queries.jsonl").open() as handle:
        return [json.loads(line)["text"] for line in handle if line.strip()]


def _start_server(port: int) -> subprocess.Popen:
    import httpx

    env = {k: v for k, v in os.environ.items() if not k.startswith("KX_")}
    env["KX_HOME"] = str(HOME)
    log = (OUT / "gateway-serve.log").open("wb")  # a file, not a pipe nobody drains
    proc = subprocess.Popen([sys.executable, "-m", "kx_tui", "serve", "--port", str(port)], cwd=REPO, env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"kx serve exited: see {OUT / 'gateway-serve.log'}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("kx serve did not answer within 60 s")


def _summary(samples: list[float]) -> dict:
    return {"n": len(samples), "p50_ms": round(percentile(samples, 50), 2),
            "p95_ms": round(percentile(samples, 95), 2), "p99_ms": round(percentile(samples, 99), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=800)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--corpus-docs", type=int, default=500)
    args = parser.parse_args()

    from engine import Engine, KxClient, KxError, load_settings
    from engine.text.inputs import from_jsonl

    # The corpus is built once and copied for each run: the load adds to it.
    base = OUT / f"gateway-base-{args.corpus_docs}"
    if not (base / "datasets" / DATASET / "catalog.sqlite").exists():
        shutil.rmtree(base, ignore_errors=True)
        builder = Engine(load_settings({"home": str(base)}))
        corpus = list(islice(from_jsonl(DATA / "scifact" / "corpus.jsonl", 50 * 2**20), args.corpus_docs))
        started = time.perf_counter()
        builder.ingest(DATASET, corpus)
        builder.close()
        print(f"corpus: {len(corpus)} documents in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    shutil.rmtree(HOME, ignore_errors=True)
    shutil.copytree(base, HOME)
    engine = Engine(load_settings({"home": str(HOME)}))
    before = engine.dataset_summary(DATASET)

    port = _free_port()
    proc = _start_server(port)
    url = f"http://127.0.0.1:{port}"
    token = (HOME / "gateway.token").read_text().strip()
    queries = _queries()
    try:
        with KxClient(url, token=token) as warm:  # the server's model loads on its first query
            for text in queries[:10]:
                warm.query(DATASET, text)

        # 1. the mixed load
        plan = [("ingest", f"Load-test note {i}: the gateway stored this exact sentence once, number {i}.")
                if i % INGEST_EVERY == INGEST_EVERY - 1 else ("query", queries[i % len(queries)])
                for i in range(args.requests)]
        cursor = iter(range(len(plan)))
        cursor_lock = threading.Lock()
        latencies: dict[str, list[float]] = {"query": [], "ingest": []}
        errors: list[str] = []
        ingested_refs: list[str] = []

        def client_loop() -> None:
            with KxClient(url, token=token) as client:
                while True:
                    with cursor_lock:
                        index = next(cursor, None)
                    if index is None:
                        return
                    kind, text = plan[index]
                    t = time.perf_counter()
                    try:
                        if kind == "query":
                            client.query(DATASET, text, k=10)
                        else:
                            report = client.ingest_documents(DATASET, [text], names=[f"load-{index}"])
                            if report.results[0].status != "added":
                                errors.append(f"ingest {index}: {report.results[0]}")
                            ingested_refs.append(report.results[0].ref or "")
                    except KxError as exc:
                        errors.append(f"{kind} {index}: {exc}")
                        continue
                    latencies[kind].append((time.perf_counter() - t) * 1000.0)

        threads = [threading.Thread(target=client_loop) for _ in range(args.clients)]
        t0 = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - t0
        everything = latencies["query"] + latencies["ingest"]

        # every ingested document present exactly once
        db = sqlite3.connect(f"file:{HOME / 'datasets' / DATASET / 'catalog.sqlite'}?mode=ro", uri=True)
        try:
            counts = {ref: db.execute("SELECT COUNT(*) FROM documents WHERE ref = ?", (ref,)).fetchone()[0]
                      for ref in ingested_refs}
            total_docs = db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        finally:
            db.close()
        expected_ingests = sum(1 for kind, _ in plan if kind == "ingest")
        exactly_once = (len(set(ingested_refs)) == expected_ingests and all(c == 1 for c in counts.values())
                        and total_docs == before.documents + expected_ingests)

        # 2. the gateway's overhead per query, one at a time, warm on both sides
        sample = queries[:200]
        for text in sample[:10]:
            engine.query(DATASET, text)
        direct, remote = [], []
        with KxClient(url, token=token) as client:
            for text in sample:
                t = time.perf_counter()
                engine.query(DATASET, text, k=10)
                direct.append((time.perf_counter() - t) * 1000.0)
                t = time.perf_counter()
                client.query(DATASET, text, k=10)
                remote.append((time.perf_counter() - t) * 1000.0)
    finally:
        proc.send_signal(signal.SIGTERM)
        exit_code = proc.wait(timeout=60)
        engine.close()

    result = {
        "corpus_documents": before.documents,
        "corpus_passages": before.passages,
        "clients": args.clients,
        "requests": len(plan),
        "ingest_every": INGEST_EVERY,
        "wall_s": round(wall, 2),
        "throughput_rps": round(len(everything) / wall, 1),
        "all": _summary(everything),
        "query": _summary(latencies["query"]),
        "ingest": _summary(latencies["ingest"]),
        "errors": len(errors),
        "error_samples": errors[:5],
        "ingested_exactly_once": exactly_once,
        "overhead": {
            "queries": len(sample),
            "in_process_p50_ms": round(percentile(direct, 50), 2),
            "gateway_p50_ms": round(percentile(remote, 50), 2),
            "ratio_p50": round(percentile(remote, 50) / percentile(direct, 50), 3),
            "added_p50_ms": round(percentile(remote, 50) - percentile(direct, 50), 2),
        },
        "server_exit_code": exit_code,
        "cpus": os.cpu_count(),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "gateway.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    if errors or not exactly_once or exit_code != 0:
        raise SystemExit(1)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
