"""What the ONNX graph's open-time check costs: fresh processes with and without the two probe sentences.

    python benchmarks/open_probes.py [--rounds 5]

Each round starts two processes, alternating: both open the cached `default`
graph's ONNX Runtime session; one then encodes the two probe sentences the
open-time check uses (engine/embedding/onnx_export.py, `_OPEN_PROBES`); both
then encode one query. Prints each run's session open, probe and first-query
milliseconds (BENCHMARKS.md, "The open-time probes"). Needs the graph in the
model cache (any earlier ingest or `kx models prepare` made it).
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from common import REPO

_CHILD = r"""
import sys, time
sys.path.insert(0, {repo!r})
from engine import load_settings
from engine.embedding.cards import model_card_for
from engine.embedding.onnx_cache import GRAPH, model_folder
from engine.embedding.onnx_export import PROBES, _OPEN_PROBES
from engine.embedding.onnx_runtime import OnnxEmbedder

settings = load_settings()
card = model_card_for(settings.embed_model)
t0 = time.perf_counter()
embedder = OnnxEmbedder(card, model_folder(settings, card) / GRAPH, settings.embed_threads, settings.embed_device)
t1 = time.perf_counter()
if {probe}:
    embedder.encode(list(PROBES[:_OPEN_PROBES]))
t2 = time.perf_counter()
embedder.encode(["Vitamin D deficiency is associated with an increased risk of multiple sclerosis."])
t3 = time.perf_counter()
print((t1 - t0) * 1000, (t2 - t1) * 1000, (t3 - t2) * 1000)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rows: dict[bool, list[list[float]]] = {True: [], False: []}
    for _ in range(args.rounds):
        for probe in (True, False):
            out = subprocess.run([sys.executable, "-c", _CHILD.format(repo=str(REPO), probe=probe)],
                                 capture_output=True, text=True, check=True)
            rows[probe].append([float(x) for x in out.stdout.split()])
    for probe, label in ((True, "with the probes"), (False, "without")):
        cols = list(zip(*rows[probe]))
        print(f"{label:16} open {min(cols[0]):.0f}-{max(cols[0]):.0f} ms  probes {min(cols[1]):.1f}-"
              f"{max(cols[1]):.1f} ms  first query {min(cols[2]):.1f}-{max(cols[2]):.1f} ms")


if __name__ == "__main__":
    main()
