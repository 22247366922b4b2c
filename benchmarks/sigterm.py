"""SIGTERM campaign: stop real kx commands at random moments; every stop within 10 s, clean, nothing lost.

    python benchmarks/sigterm.py [--rounds 50] [--files 100] [--seed 23] [--restart-every 5]
    python benchmarks/sigterm.py --commands serve,ingest,embed --rounds 20

`--commands` (default watch) picks the commands, `--rounds` is per command.
The serve, ingest and embed rounds are described in tests/sigterm_commands.py
(serve and embed start from a dataset with a ~450-passage embedding backlog;
clean stop codes: serve 0, ingest and embed 130 CANCELLED).

By hand, not in CI (~10 s a round here). Each round (tests/sigterm_rounds.py
has the details): a fresh KX_HOME sharing one prepared model export cache, a
folder of 100 Markdown files, `kx datasets watch NAME DIR --json`, one
SIGTERM at a moment cycling through: the instant the first `batch_done` line
arrives (the moment that used to deadlock), a random delay into the batch, a
random delay after `watching`, a random delay into start-up; every 7th round
sends three SIGTERMs at once. Checks: exit within 10 s, code 0, a `stopped`
line; every file reported ingested is in the catalogue once and whole,
`PRAGMA integrity_check` ok; every `--restart-every`th round the same watch
is run again and must take in the rest (every file once, both index
watermarks at the top passage). tests/test_stopping.py runs one round per
moment.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.sigterm_commands import (  # noqa: E402
    EMBED_MOMENTS,
    INGEST_MOMENTS,
    SERVE_MOMENTS,
    make_backlog_template,
    run_embed_round,
    run_ingest_round,
    run_serve_round,
)
from tests.sigterm_rounds import MOMENTS, prepare_model, run_round  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument("--restart-every", type=int, default=5, help="run the restart check every Nth round (0: never)")
    parser.add_argument("--limit", type=float, default=10.0, help="seconds a stop may take")
    parser.add_argument("--commands", default="watch", help="comma-separated: watch, serve, ingest, embed")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    cpu = subprocess.run("grep -o 'avx512_vnni\\|avx2' /proc/cpuinfo | sort -u | tr '\\n' ' '", shell=True,
                         capture_output=True, text=True).stdout.strip()
    print(f"CPU flags: {cpu or 'unknown'}; cores: {os.cpu_count()}; load: {os.getloadavg()[0]:.1f}", flush=True)
    commands = [c.strip() for c in args.commands.split(",") if c.strip()]
    with tempfile.TemporaryDirectory(prefix="kx-sigterm-") as scratch:
        root = Path(scratch)
        cache = root / "model-cache"
        cache.mkdir()
        prepare_model(cache, root)
        failed = 0
        for command in commands:
            if command == "watch":
                failed += _watch_campaign(args, rng, root, cache)
            else:
                failed += _command_campaign(command, args, rng, root, cache)
    sys.exit(1 if failed else 0)


def _command_campaign(command: str, args: argparse.Namespace, rng: random.Random, root: Path, cache: Path) -> int:
    moments = {"serve": SERVE_MOMENTS, "ingest": INGEST_MOMENTS, "embed": EMBED_MOMENTS}[command]
    template = root / "template"
    if command in ("serve", "embed") and not template.exists():
        backlog = make_backlog_template(template, cache, files=args.files)
        print(f"template: dataset with {backlog} passages waiting for vectors", flush=True)
    results = []
    started = time.monotonic()
    for i in range(args.rounds):
        moment = moments[i % len(moments)]
        signals = 3 if i % 7 == 6 else 1
        restart = bool(args.restart_every) and i % args.restart_every == args.restart_every - 1
        work = root / f"{command}{i:03d}"
        if command == "serve":
            result = run_serve_round(work, cache, template, moment, rng, limit=args.limit, signals=signals,
                                     restart=restart)
        elif command == "embed":
            result = run_embed_round(work, cache, template, moment, rng, limit=args.limit, signals=signals,
                                     restart=restart)
        else:
            result = run_ingest_round(work, cache, moment, rng, files=min(args.files, 50), limit=args.limit,
                                      signals=signals, restart=restart, seed=args.seed * 1000 + i)
        results.append(result)
        print(f"{command} {i + 1:3d} {moment:9s} x{signals} delay {result.delay:5.2f} s"
              f"  stop {result.stop_seconds:5.2f} s  exit {result.exit_code}  reported {result.reported:3d}"
              f"  vectors {result.vectors_before:4d} -> "
              f"{result.vectors_after:4d}  {'pre-handler ' if result.pre_handler else ''}"
              f"{'finished-first ' if result.finished_first else ''}{'guard ' if result.guard else ''}"
              f"{'restart ' if restart else ''}{'ok' if result.ok else 'FAIL ' + '; '.join(result.problems)}",
              flush=True)
        subprocess.run(["rm", "-rf", str(work)], check=False)
    stopped = [r for r in results if not r.finished_first]
    stops = [r.stop_seconds for r in stopped] or [0.0]
    ok = sum(r.ok for r in results)
    print(f"\n{command}: {ok} of {len(results)} rounds ok in {time.monotonic() - started:.0f} s; within "
          f"{args.limit:g} s: {sum(r.stop_seconds < args.limit for r in results)}; clean exit code: "
          f"{sum(r.ok and not r.pre_handler and not r.finished_first for r in results)}; finished before the "
          f"signal: {sum(r.finished_first for r in results)}; pre-handler (-15): {sum(r.pre_handler for r in results)}"
          f"; left through the guard: {sum(r.guard for r in results)}")
    print(f"{command} stop seconds: median {statistics.median(stops):.2f}, max {max(stops):.2f}; by moment: "
          + ", ".join(f"{m} max {max(r.stop_seconds for r in stopped if r.moment == m):.2f}"
                      for m in moments if any(r.moment == m for r in stopped)), flush=True)
    return len(results) - ok


def _watch_campaign(args: argparse.Namespace, rng: random.Random, root: Path, cache: Path) -> int:
    results = []
    started = time.monotonic()
    for i in range(args.rounds):
        moment = MOMENTS[i % len(MOMENTS)]
        signals = 3 if i % 7 == 6 else 1
        restart = bool(args.restart_every) and i % args.restart_every == args.restart_every - 1
        work = root / f"round{i:03d}"
        result = run_round(work, cache, moment, rng, files=args.files, limit=args.limit, restart=restart,
                           seed=args.seed * 1000 + i, signals=signals)
        results.append(result)
        print(f"{i + 1:3d} {moment:17s} x{signals} delay {result.delay:5.2f} s  stop {result.stop_seconds:5.2f} s"
              f"  exit {result.exit_code}  reported {result.reported:3d}  committed {result.committed:3d}"
              f"  abandoned {result.abandoned}  {'pre-handler ' if result.pre_handler else ''}"
              f"{'guard ' if result.guard else ''}"
              f"{'ok' if result.ok else 'FAIL ' + '; '.join(result.problems)}",
              flush=True)
        subprocess.run(["rm", "-rf", str(work)], check=False)
    stops = [r.stop_seconds for r in results]
    ok = sum(r.ok for r in results)
    print(f"\n{ok} of {len(results)} rounds ok in {time.monotonic() - started:.0f} s; "
          f"exit 0: {sum(r.exit_code == 0 for r in results)}; within {args.limit:g} s: "
          f"{sum(s < args.limit for s in stops)}")
    print(f"stop seconds: median {statistics.median(stops):.2f}, max {max(stops):.2f}; "
          f"by moment: " + ", ".join(f"{m} max {max(r.stop_seconds for r in results if r.moment == m):.2f}"
                                      for m in MOMENTS if any(r.moment == m for r in results)))
    print("ended by the default action before kx's code ran (start-up):", sum(r.pre_handler for r in results),
          "| left through the guard:", sum(r.guard for r in results),
          "| batches given up:", sum(r.abandoned is not None for r in results),
          "| reported-then-lost:", sum(r.reported > r.committed for r in results),
          "| rounds by outcome:", dict(Counter('ok' if r.ok else 'fail' for r in results)), flush=True)
    return len(results) - ok


if __name__ == "__main__":
    main()
