"""int8 quantisation schemes side by side: speed per CPU-second, closeness to fp32, nDCG@10 cost.

    python benchmarks/int8_schemes.py [--passages 192] [--collections cranfield cisi]

Each scheme is quantised (once, into benchmarks/out/int8-schemes/) from the
fp32 graph kx exports, with onnxruntime's dynamic quantisation of the weight
MatMuls (`MatMulConstBOnly`), per channel:
- u8u8: unsigned 8-bit weights (what kx ships);
- s7: 7-bit signed weights (reduce_range), every weight MatMul;
- s7, with some MatMuls left in fp32: layer 0's feed-forward down-projection,
  the first three layers' ones.
Speed: each graph in a 1-thread session, timed with `time.thread_time()` (the
CPU the embedding used, so a loaded machine distorts it less than wall time),
interleaved rounds of SciFact passages, median, against fp32. Closeness: mean
and min cosine to fp32 on 96 passages. With --collections: nDCG@10 of exact
dense retrieval over whole documents (as `embedding.py --parts quality`) for
fp32 and each scheme; the target is a cost <= 0.005. Session 3's figures are in
BENCHMARKS.md ("int8 schemes, measured per CPU-second").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from common import HOME, REPO

from embedding import _ndcg, _passages, whole_documents

OUT = REPO / "benchmarks" / "out" / "int8-schemes"


def _down_projections(graph: Path, layers: int) -> list[str]:
    """The first `layers` MatMuls whose constant weight narrows its input (feed-forward outputs)."""
    import onnx

    model = onnx.load(str(graph), load_external_data=False)
    shapes = {init.name: list(init.dims) for init in model.graph.initializer}
    found = [n.name for n in model.graph.node if n.op_type == "MatMul" and len(n.input) == 2
             and len(shapes.get(n.input[1], [])) == 2 and shapes[n.input[1]][0] > shapes[n.input[1]][1]]
    return found[:layers]


def schemes(fp32_graph: Path) -> dict[str, Path]:
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    OUT.mkdir(parents=True, exist_ok=True)
    pre = OUT / "preprocessed.onnx"
    if not pre.exists():
        quant_pre_process(str(fp32_graph), str(pre), skip_symbolic_shape=True)
    variants = {
        "u8u8": dict(weight_type=QuantType.QUInt8),
        "s7": dict(weight_type=QuantType.QInt8, reduce_range=True),
        "s7, layer 0 down-projection fp32": dict(weight_type=QuantType.QInt8, reduce_range=True,
                                                 nodes_to_exclude=_down_projections(pre, 1)),
        "s7, layers 0-2 down-projections fp32": dict(weight_type=QuantType.QInt8, reduce_range=True,
                                                     nodes_to_exclude=_down_projections(pre, 3)),
    }
    graphs = {}
    for name, options in variants.items():
        target = OUT / (name.replace(" ", "_").replace(",", "") + ".onnx")
        if not target.exists():
            quantize_dynamic(str(pre), str(target), per_channel=True, extra_options={"MatMulConstBOnly": True},
                             **options)
        graphs[name] = target
    return graphs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=192)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--collections", nargs="*", default=[])
    args = parser.parse_args()

    import numpy as np

    from engine import load_settings
    from engine.embedding.cards import model_card_for
    from engine.embedding.onnx_export import open_onnx
    from engine.embedding.onnx_runtime import OnnxEmbedder

    settings = load_settings({"home": str(HOME)}, env={})
    fp32_card, int8_card = model_card_for("default"), model_card_for("default-int8")
    fp32_graph = open_onnx(settings, fp32_card, lambda line: print(line, file=sys.stderr)).graph
    embedders = {"fp32": OnnxEmbedder(fp32_card, fp32_graph, threads=1)}
    embedders.update({name: OnnxEmbedder(int8_card, g, threads=1) for name, g in schemes(fp32_graph).items()})

    texts = _passages(args.passages + 96)
    probe, timed = texts[:96], texts[96:]
    reference = embedders["fp32"].encode(probe, 16)
    result: dict = {}
    for name, e in embedders.items():
        cos = np.sum(e.encode(probe, 16) * reference, axis=1)
        result[name] = {"mean_cosine_to_fp32": round(float(cos.mean()), 5),
                        "min_cosine_to_fp32": round(float(cos.min()), 5)}
    size = max(len(timed) // args.rounds, 1)
    rates: dict[str, list[float]] = {name: [] for name in embedders}
    for r in range(args.rounds):
        part = timed[r * size:(r + 1) * size]
        order = list(embedders.items()) if r % 2 == 0 else list(embedders.items())[::-1]
        for name, e in order:
            start = time.thread_time()
            e.encode(part, 16)
            rates[name].append(len(part) / (time.thread_time() - start))
    base = statistics.median(rates["fp32"])
    for name, values in rates.items():
        result[name]["passages_per_cpu_second"] = round(statistics.median(values), 2)
        result[name]["vs_fp32"] = round(statistics.median(values) / base, 3)
    print(json.dumps(result, indent=1), flush=True)

    threaded = {name: OnnxEmbedder(e.card, e.graph) for name, e in embedders.items()}  # all cores for nDCG
    for collection in args.collections:
        ids, corpus, queries, qrels = whole_documents(collection)
        scores = {}
        for name, e in threaded.items():
            scores[name] = _ndcg(e.encode(corpus, 16), ids, e.encode(list(queries.values()), 16), list(queries), qrels)
            print(f"{collection} {name}: nDCG@10 {scores[name]:.4f}", file=sys.stderr, flush=True)
        for name in threaded:
            result[name][f"{collection}_ndcg_cost"] = round(scores["fp32"] - scores[name], 4)
    (REPO / "benchmarks" / "out").mkdir(exist_ok=True)
    (REPO / "benchmarks" / "out" / "int8-schemes.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
