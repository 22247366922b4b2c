"""Load and soak: 32 concurrent clients against `kx serve` on loopback, every 8th request an ingest.

    python benchmarks/soak.py [--clients 32] [--seconds 120] [--warmup 10] [--ingest-every 8]
    python benchmarks/soak.py --ingest-every 0          # queries only: a dataset that does not grow

A real `kx serve` (its own KX_HOME, the real model) with the handbook
samples ingested; each client is a KxClient on its own connection, looping
until the time is up: a hybrid query for one of a few questions, and every
8th request overall an ingest of one new small document. Reports requests,
errors (any KxError or transport failure: the target is zero), p50/p95/p99
latency per kind, and the server's RSS after the warm-up and at the end
(target: growth under 10 %), plus a sample every tenth of the run, so growth
that follows the dataset (every ingest reopens readers over a bigger graph
and BM25 index) can be told from growth that does not (a leak): with
`--ingest-every 0` the dataset never grows.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import REPO, percentile

QUESTIONS = ["how long do I have to return a logger?", "who approves travel expenses",
             "VPN password reset", "how many vacation days", "remote work equipment"]


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--ingest-every", type=int, default=8,
                        help="every Nth request is an ingest of one new document; 0 for queries only")
    args = parser.parse_args()

    from engine import KxClient, KxError

    home = Path(tempfile.mkdtemp(prefix="kx-soak-"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("KX_")}
    env.update({"KX_HOME": str(home), "PYTHONPATH": str(REPO)})
    # --quiet: stderr is a pipe read only at the end; a line per request would fill it and stall the server
    server = subprocess.Popen([sys.executable, "-m", "kx_tui", "serve", "--quiet", "--port", str(port)], cwd=REPO,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                token = (home / "gateway.token").read_text().strip()
                with KxClient(url, token=token, timeout=10) as probe:
                    probe.info()
                break
            except (OSError, KxError):
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("kx serve did not start") from None
                time.sleep(0.2)
        samples = sorted((REPO / "samples" / "handbook").glob("*.md"))
        with KxClient(url, token=token, timeout=300) as client:
            client.ingest_documents("soak", [p.read_text() for p in samples], names=[p.stem for p in samples])
            client.query_dataset("soak", text=QUESTIONS[0])  # the model is warm before the clock starts

        counter = itertools.count()
        lock = threading.Lock()
        latencies: dict[str, list[float]] = {"query": [], "ingest": []}
        errors: list[str] = []
        stop = threading.Event()
        measuring = threading.Event()

        def client_loop(number: int) -> None:
            with KxClient(url, token=token, timeout=120) as client:
                while not stop.is_set():
                    n = next(counter)
                    every = args.ingest_every
                    kind = "ingest" if every and n % every == every - 1 else "query"
                    started = time.perf_counter()
                    try:
                        if kind == "ingest":
                            client.ingest_documents("soak", [f"Soak note {n} from client {number}: the "
                                                             f"shuttle leaves bay {n % 97} at {n % 24} hours."])
                        else:
                            client.query_dataset("soak", text=QUESTIONS[n % len(QUESTIONS)], k=10)
                    except Exception as exc:  # every failure counts, whatever its kind
                        with lock:
                            errors.append(f"{kind}: {type(exc).__name__}: {exc}"[:300])
                        continue
                    if measuring.is_set():
                        with lock:
                            latencies[kind].append((time.perf_counter() - started) * 1000)

        threads = [threading.Thread(target=client_loop, args=(i,), daemon=True) for i in range(args.clients)]
        for thread in threads:
            thread.start()
        time.sleep(args.warmup)
        rss_start = _rss(server.pid)
        measuring.set()
        began = time.monotonic()
        series = []
        for _tenth in range(10):
            time.sleep(args.seconds / 10)
            series.append(round(_rss(server.pid) / 2**20, 1))
        measuring.clear()
        elapsed = time.monotonic() - began
        rss_end = _rss(server.pid)
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
        figures = {
            "clients": args.clients, "seconds": round(elapsed, 1),
            "requests": sum(len(v) for v in latencies.values()), "errors": len(errors),
            "throughput_rps": round(sum(len(v) for v in latencies.values()) / elapsed, 1),
            "rss_start_mb": round(rss_start / 2**20, 1), "rss_end_mb": round(rss_end / 2**20, 1),
            "rss_growth_pct": round(100.0 * (rss_end - rss_start) / rss_start, 1) if rss_start else None,
            "rss_series_mb": series, "ingest_every": args.ingest_every,
        }
        for kind, values in latencies.items():
            figures[kind] = {"n": len(values), **{f"p{q}_ms": round(percentile(values, q), 1) for q in (50, 95, 99)}}
        print(json.dumps(figures, indent=1))
        for error in errors[:10]:
            print("  error:", error)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        import shutil

        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
