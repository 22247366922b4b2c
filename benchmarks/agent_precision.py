"""The offline agent on the shipped handbook: how much it reads and how tight its answer is.

    python benchmarks/agent_precision.py [--home DIR] [--json OUT]

Each goal names the handbook document that answers it and a few topic words. Reported per goal:
steps, passages read, answer sentences, and precision — the share of answer sentences judged on-topic
by this rule: the sentence is quoted from that document AND holds one of the goal's topic words
(lower case, as a prefix: "refund" finds "refunded"). The leave document also holds sick and parental
leave, so "from the right document" alone would count padding as on-topic. The handbook is ingested
once into --home with the real model.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from common import BENCH_DIR, REPO

GOALS = (
    ("refund for a damaged logger", "refunds-and-returns", ("refund", "damage", "faulty", "broken", "rma", "replace")),
    ("summarise our refund policy", "refunds-and-returns", ("refund", "return", "rma", "credit", "voucher")),
    ("how much may a hotel cost per night", "travel-and-expenses", ("hotel", "night", "accommodation")),
    ("how many days of annual leave do I get", "leave-and-holidays", ("annual leave", "holiday", "unused day",
                                                                     "entitlement", "carry")),
    ("who approves sick leave", "leave-and-holidays", ("sick", "ill", "approv")),
    ("what do I need to work from home", "remote-work", ("home", "remote", "equipment", "broadband", "vpn")),
    ("how do I get a building badge on my first day", "onboarding", ("badge", "first day", "reception")),
    ("how often must I change my password", "security-and-access", ("password",)),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, default=BENCH_DIR / "agent-home")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    from engine import Engine, load_settings
    from engine.text.inputs import from_file

    engine = Engine(load_settings({"home": str(args.home)}, env={}))
    if "handbook" not in {s.name for s in engine.list_datasets()}:
        engine.ingest("handbook", [from_file(p, 10**7) for p in sorted((REPO / "samples" / "handbook").glob("*.md"))])
    rows = []
    for goal, document, topic in GOALS:
        started = time.perf_counter()
        run = engine.run_agent(goal, "handbook")
        claims = [line for line in run.answer.splitlines() if line.startswith("- ")]
        on_topic = [line for line in claims
                    if f"[{document}" in line and any(f" {t}" in f" {line.lower()}" for t in topic)]
        rows.append({"goal": goal, "steps": len(run.steps), "read": len(run.read), "sentences": len(claims),
                     "precision": (len(on_topic) / len(claims)) if claims else None, "stop": run.stop_reason,
                     "seconds": round(time.perf_counter() - started, 2), "answer": run.answer})
        print(f"{goal[:44]:46}steps {rows[-1]['steps']:>2}  read {rows[-1]['read']:>2}  sentences {len(claims):>2}  "
              f"precision {rows[-1]['precision'] if claims else float('nan'):.2f}  {run.stop_reason}", flush=True)
    scored = [r for r in rows if r["precision"] is not None]
    n = len(rows)
    print(f"mean: steps {sum(r['steps'] for r in rows) / n:.1f}, read {sum(r['read'] for r in rows) / n:.1f}, "
          f"sentences {sum(r['sentences'] for r in rows) / n:.1f}, "
          f"precision {sum(r['precision'] for r in scored) / len(scored):.3f}", file=sys.stdout)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
