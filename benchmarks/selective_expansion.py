"""Selective query expansion, measured offline: would expanding only SOME queries meet issue #24's targets?

    KX_BENCH_DIR=/tmp/kxq-cache python benchmarks/selective_expansion.py collect [--out DIR]
    KX_BENCH_DIR=/tmp/kxq-cache python benchmarks/selective_expansion.py analyse [--out DIR]

`collect` runs every judged query of Cranfield, CISI and SciFact under kx
hybrid with MMR (as shipped; k = EVAL_DEPTH, as quality.py) twice, without
and with expand (engine/expansion.py), and keeps each query's nDCG@10 both
ways (a document counts once at its best passage's rank; ir-measures, as
engine/evaluation.py), and each of the 54 QA questions' rank of the first
successful hit both ways (qa.py's judge; hybrid, k=10, MMR on). For each
query it also records first-pass signals, all computable at query time
without judgements (chosen before looking at outcomes):

    n_terms       analysed query terms (stopwords out, stemmed), distinct
    n_tokens      analysed query tokens, repeats counted
    overlap5/10   share of dense's top-5/10 documents also in sparse's top-5/10
                  (mode dense and mode sparse run separately, MMR off)
    lead          sparse's top-1 passage BM25 score over its runner-up's
    sparse_top1_per_token   sparse's top-1 BM25 score / n_tokens
    dense_top1    dense's top-1 cosine
    dense_gap     dense's top-1 cosine minus its 10th
    distinct5     distinct documents among the first pass's top-5 fused passages
                  (the feedback set) / 5
    top1_agree    how many of dense's and sparse's top-1 documents equal the
                  first pass's top-1 document (0-2)
    exp_overlap10 share of the first pass's top-10 documents still in the
                  expanded pass's top-10 (a drift signal: needs both passes,
                  which expansion runs anyway)

`collect` also runs two extra arms, each query expanded in one list only
(the other list kept as in the first pass): "rm3" (sparse expanded) and
"rocchio" (dense expanded), by patching engine.ranking._expanded_lists inside
this process only (engine/ is unchanged); they are the rows' on_rm3 and
on_rocchio.

`analyse` scores every single-feature rule "expand iff feature >= t" and
"expand iff feature <= t" over each feature's observed values: per collection
mean nDCG@10, QA success@1/@5/MRR@10, share expanded; and says which rules
meet all targets (Cranfield >= 0.4313, CISI >= 0.4514, SciFact >= 0.7261,
QA s@1 >= 0.80, s@5 >= 0.95) and how the neighbouring thresholds fare.
It prints the oracle (each query the better of off/on), per-query wins and
losses, each feature's Spearman rho with the per-query gain per set, a decile
sweep of the best rule's threshold, and a split-half check (choose the rule on
a random half of every set, score it on the other half). The per-query data
is DIR/per_query.json, the rule grid DIR/rules.json (default DIR /tmp/selexp).
Takes about 3 minutes (collect) and 5 seconds (analyse) on 2 CPUs.

Result (2026-12-04, main at 7a3daf6): no single-feature rule meets every
target; the best (dense_top1 >= 0.671) gives Cranfield 0.4255, CISI 0.4467,
SciFact 0.7214 with QA unchanged. No feature predicts the per-query gain inside
a collection (|rho| <= 0.2), and the rule chosen on random halves changes from
half to half and meets the targets on the other half 0 times in 50.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from common import DATA, HOME, ensure_dataset

COLLECTIONS = ("cranfield", "cisi", "scifact")
TARGETS = {"cranfield": 0.4313, "cisi": 0.4514, "scifact": 0.7261}
QA_TARGETS = {"success@1": 0.80, "success@5": 0.95}
FEATURES = ("n_terms", "n_tokens", "overlap5", "overlap10", "lead", "sparse_top1_per_token", "dense_top1",
            "dense_gap", "distinct5", "top1_agree", "exp_overlap10")


# Extra arms (not selective expansion itself): expansion of one list only, the other kept as in the first pass.
# Patched into the benchmark process only (engine.ranking._expanded_lists); engine/ is unchanged.
ARMS = ("rm3", "rocchio")


class only_arm:
    """Within the block, expand = True expands the sparse list only ("rm3") or the dense list only ("rocchio")."""

    def __init__(self, arm: str):
        self.arm = arm

    def __enter__(self):
        import engine.ranking as q

        self.original = original = q._expanded_lists
        keep = "dense" if self.arm == "rm3" else "sparse"

        def patched(searcher, text, query_vector, lists, *args, **kwargs):
            out, added = original(searcher, text, query_vector, lists, *args, **kwargs)
            if keep in lists:
                out[keep] = lists[keep]
            return out, (added if self.arm == "rm3" else [])

        q._expanded_lists = patched

    def __exit__(self, *exc):
        import engine.ranking as q

        q._expanded_lists = self.original


def doc_order(hits) -> list[str]:
    out: list[str] = []
    for h in hits:
        if h.document_name not in out:
            out.append(h.document_name)
    return out


def features(engine, name: str, text: str, first, expanded, analyzer) -> dict:
    tokens = [t.text for t in analyzer(text)]
    dense = engine.query(name, text, k=20, mode="dense", rerank=False).hits
    sparse = engine.query(name, text, k=20, mode="sparse", rerank=False).hits
    dd, sd, fd, ed = doc_order(dense), doc_order(sparse), doc_order(first), doc_order(expanded)
    ss = [h.sparse_score for h in sparse]
    ds = [h.dense_score for h in dense]
    return {
        "n_terms": len(set(tokens)),
        "n_tokens": len(tokens),
        "overlap5": len(set(dd[:5]) & set(sd[:5])) / 5.0,
        "overlap10": len(set(dd[:10]) & set(sd[:10])) / 10.0,
        "lead": (ss[0] / ss[1]) if len(ss) > 1 and ss[1] else (10.0 if ss else 0.0),
        "sparse_top1_per_token": (ss[0] / len(tokens)) if ss and tokens else 0.0,
        "dense_top1": ds[0] if ds else 0.0,
        "dense_gap": (ds[0] - ds[min(9, len(ds) - 1)]) if ds else 0.0,
        "distinct5": len({h.document_name for h in first[:5]}) / 5.0,
        "top1_agree": (int(bool(dd) and bool(fd) and dd[0] == fd[0]) + int(bool(sd) and bool(fd) and sd[0] == fd[0])),
        "exp_overlap10": len(set(fd[:10]) & set(ed[:10])) / 10.0,
    }


def per_query_measures(qrels: dict, run: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    import ir_measures
    from ir_measures import Qrel, ScoredDoc

    rows = [Qrel(q, d, r) for q, docs in qrels.items() if q in run for d, r in docs.items()]
    scored = [ScoredDoc(q, d, s) for q, docs in run.items() for d, s in docs.items()]
    out = {q: {"nDCG@10": 0.0, "RR@10": 0.0} for q in run}
    for m in ir_measures.iter_calc([ir_measures.parse_measure("nDCG@10"), ir_measures.parse_measure("RR@10")],
                                   rows, scored):
        out[m.query_id][str(m.measure)] = float(m.value)
    return out


def collect_collection(name: str) -> list[dict]:
    from engine import Engine, load_settings
    from engine.evaluation import EVAL_DEPTH, document_run, read_qrels, read_queries
    from engine.text.analysis import build_analyzer

    cached = ensure_dataset(name)
    engine = Engine(load_settings({"home": str(HOME), "max_k": EVAL_DEPTH, "candidate_pool": EVAL_DEPTH}),
                    cached.embedder())
    analyzer = build_analyzer(True)
    queries = read_queries(DATA / name / "queries.jsonl")
    qrels = read_qrels(DATA / name / "qrels.tsv")
    judged = {q: t for q, t in queries.items() if q in qrels}
    rows, runs = [], {"off": {}, "on": {}}
    started = time.perf_counter()
    for i, (qid, text) in enumerate(judged.items(), 1):
        first = engine.query(name, text, k=EVAL_DEPTH, mode="hybrid", rerank=True, expand=False).hits
        expanded = engine.query(name, text, k=EVAL_DEPTH, mode="hybrid", rerank=True, expand=True).hits
        runs["off"][qid], runs["on"][qid] = document_run(first), document_run(expanded)
        rows.append({"collection": name, "id": qid, "text": text,
                     **features(engine, name, text, first, expanded, analyzer)})
        if i % 50 == 0:
            print(f"{name}: {i}/{len(judged)} {time.perf_counter() - started:.0f}s", file=sys.stderr, flush=True)
    for arm in ARMS:
        with only_arm(arm):
            runs[arm] = {qid: document_run(engine.query(name, text, k=EVAL_DEPTH, mode="hybrid", rerank=True,
                                                        expand=True).hits) for qid, text in judged.items()}
    measured = {key: per_query_measures(qrels, run) for key, run in runs.items()}
    for row in rows:
        row["off"], row["on"] = measured["off"][row["id"]]["nDCG@10"], measured["on"][row["id"]]["nDCG@10"]
        for arm in ARMS:
            row[f"on_{arm}"] = measured[arm][row["id"]]["nDCG@10"]
    print(f"{name}: {len(rows)} queries, nDCG@10 off {sum(r['off'] for r in rows) / len(rows):.4f} "
          f"on {sum(r['on'] for r in rows) / len(rows):.4f}", file=sys.stderr, flush=True)
    return rows


def collect_qa() -> list[dict]:
    from qa import NAME, ensure_qa_dataset, judge, load_questions

    from engine.text.analysis import build_analyzer

    engine = ensure_qa_dataset()
    analyzer = build_analyzer(True)
    rows = []
    for q in load_questions():
        text = q["question"]
        first = engine.query(NAME, text, k=10, mode="hybrid", rerank=True, expand=False).hits
        expanded = engine.query(NAME, text, k=10, mode="hybrid", rerank=True, expand=True).hits
        row = {"collection": "qa", "id": q["id"], "text": text,
               **features(engine, NAME, text, first, expanded, analyzer),
               "off": judge(q, first)["rank"], "on": judge(q, expanded)["rank"]}
        for arm in ARMS:
            with only_arm(arm):
                row[f"on_{arm}"] = judge(q, engine.query(NAME, text, k=10, mode="hybrid", rerank=True,
                                                         expand=True).hits)["rank"]
        for mode in ("sparse", "dense"):
            row[mode] = judge(q, engine.query(NAME, text, k=10, mode=mode, rerank=True).hits)["rank"]
        rows.append(row)
    return rows


def qa_summary(ranks: list) -> dict:
    n = len(ranks)
    return {"success@1": sum(r == 1 for r in ranks) / n,
            "success@5": sum(r is not None and r <= 5 for r in ranks) / n,
            "MRR@10": sum(1.0 / r for r in ranks if r is not None) / n}


def evaluate_rule(data: dict, decide, on: str = "on") -> dict:
    out = {}
    for name in COLLECTIONS:
        rows = data[name]
        chosen = [r[on] if decide(r) else r["off"] for r in rows]
        out[name] = sum(chosen) / len(rows)
        out[f"{name} share"] = sum(bool(decide(r)) for r in rows) / len(rows)
    qa = data["qa"]
    out.update(qa_summary([r[on] if decide(r) else r["off"] for r in qa]))
    out["qa share"] = sum(bool(decide(r)) for r in qa) / len(qa)
    return out


def meets(res: dict) -> bool:
    return (all(res[c] >= t for c, t in TARGETS.items())
            and all(res[m] >= t - 1e-9 for m, t in QA_TARGETS.items()))


def fmt(label: str, res: dict) -> str:
    cells = [f"{res[c]:.4f} ({res[c + ' share']:.0%})" for c in COLLECTIONS]
    return (f"{label:34}" + "".join(f"{c:>17}" for c in cells)
            + f"{res['success@1']:>8.3f}{res['success@5']:>8.3f}{res['MRR@10']:>8.3f}{res['qa share']:>7.0%}"
            + ("  MEETS ALL" if meets(res) else ""))


def rule_grid(data: dict, on: str = "on") -> list[dict]:
    """Every rule "expand iff feature >= t" / "<= t", t over the feature's observed values (all sets pooled)."""
    results = []
    for feature in FEATURES:
        values = sorted({r[feature] for rows in data.values() for r in rows})
        for direction in (">=", "<="):
            grid = []
            for t in values:
                if direction == ">=":
                    res = evaluate_rule(data, lambda r, t=t: r[feature] >= t, on)
                else:
                    res = evaluate_rule(data, lambda r, t=t: r[feature] <= t, on)
                grid.append((t, res))
            for i, (t, res) in enumerate(grid):
                # the worst shortfall against any target (>= 0: all met)
                slack = min([res[c] - tt for c, tt in TARGETS.items()]
                            + [res[m] - tt for m, tt in QA_TARGETS.items()])
                neighbours = [g[1] for g in grid[max(0, i - 2):i + 3]]
                results.append({"arm": on, "feature": feature, "direction": direction, "t": t, "slack": slack,
                                "meets": meets(res), "neighbours_meeting": sum(meets(n) for n in neighbours),
                                "neighbours": len(neighbours), **res})
    return results


def spearman(x: list[float], y: list[float]) -> float:
    def ranks(v):
        order = sorted(range(len(v)), key=v.__getitem__)
        out = [0.0] * len(v)
        i = 0
        while i < len(v):
            j = i
            while j + 1 < len(v) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                out[order[k]] = (i + j) / 2.0
            i = j + 1
        return out
    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    sy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return cov / (sx * sy) if sx and sy else 0.0


def rr(rank) -> float:
    return 0.0 if rank is None else 1.0 / rank


def analyse(data: dict) -> list[dict]:
    header = (f"{'rule':34}" + "".join(f"{c:>17}" for c in COLLECTIONS)
              + f"{'s@1':>8}{'s@5':>8}{'MRR':>8}{'qa exp':>7}")
    print("nDCG@10 per collection (share of queries expanded); QA hybrid success@1, @5, MRR@10 (share expanded)")
    print(header)
    print(fmt("no expansion", evaluate_rule(data, lambda r: False)))
    arms = ["on"] + [f"on_{a}" for a in ARMS if f"on_{a}" in data["qa"][0]]
    for on in arms:
        print(fmt(f"always expand ({'both lists' if on == 'on' else on[3:] + ' only'})",
                  evaluate_rule(data, lambda r: True, on)))
    oracle = {name: sum(max(r["on"], r["off"]) for r in data[name]) / len(data[name]) for name in COLLECTIONS}
    print("oracle (per query the better of off/on):", {k: round(v, 4) for k, v in oracle.items()},
          "QA s@1", round(sum(r["on"] == 1 or r["off"] == 1 for r in data["qa"]) / len(data["qa"]), 3))
    qa = data["qa"]
    print("QA sparse:", {k: round(v, 3) for k, v in qa_summary([r["sparse"] for r in qa]).items()},
          "dense:", {k: round(v, 3) for k, v in qa_summary([r["dense"] for r in qa]).items()})
    print("\nper query, on - off: wins / losses / ties")
    for name in COLLECTIONS:
        d = [r["on"] - r["off"] for r in data[name]]
        print(f"  {name}: {sum(x > 1e-9 for x in d)} / {sum(x < -1e-9 for x in d)} / "
              f"{sum(abs(x) <= 1e-9 for x in d)}")
    d = [rr(r["on"]) - rr(r["off"]) for r in qa]
    print(f"  qa (reciprocal rank): {sum(x > 1e-9 for x in d)} / {sum(x < -1e-9 for x in d)} / "
          f"{sum(abs(x) <= 1e-9 for x in d)}")
    print("\nSpearman rho of each feature with the per-query gain (on - off; QA: reciprocal rank)")
    print(f"{'feature':24}" + "".join(f"{c:>11}" for c in (*COLLECTIONS, "qa")))
    for feature in FEATURES:
        cells = []
        for name in (*COLLECTIONS, "qa"):
            rows = data[name]
            gain = [(rr(r["on"]) - rr(r["off"])) if name == "qa" else r["on"] - r["off"] for r in rows]
            cells.append(spearman([r[feature] for r in rows], gain))
        print(f"{feature:24}" + "".join(f"{c:>+11.2f}" for c in cells))

    rules = [r for on in arms for r in rule_grid(data, on)]
    for on in arms:
        mine = [r for r in rules if r["arm"] == on]
        met = [r for r in mine if r["meets"]]
        print(f"\n[{on}] {len(met)} of {len(mine)} single-feature rules meet every target; "
              f"{sum(r['cranfield'] >= TARGETS['cranfield'] for r in mine)} reach Cranfield's")
        print("best by worst-case slack, one per feature and direction:")
        seen = set()
        for r in sorted(mine, key=lambda r: -r["slack"]):
            key = (r["feature"], r["direction"])
            if key in seen or len(seen) >= 8:
                continue
            seen.add(key)
            print(fmt(f"{r['feature']} {r['direction']} {r['t']:.4g}", r)
                  + f"  slack {r['slack']:+.4f}, {r['neighbours_meeting']}/{r['neighbours']} nbrs meet")
        top = max(mine, key=lambda r: r["slack"])
        values = sorted(r[top["feature"]] for name in (*COLLECTIONS, "qa") for r in data[name])
        print(f"sensitivity of {top['feature']} {top['direction']} t, t at pooled deciles:")
        for q in range(1, 10):
            t = values[len(values) * q // 10]
            cmp = (lambda r, t=t, f=top["feature"]: r[f] >= t) if top["direction"] == ">=" else \
                (lambda r, t=t, f=top["feature"]: r[f] <= t)
            print(fmt(f"  {top['feature']} {top['direction']} {t:.4g}", evaluate_rule(data, cmp, on)))
        print("best Cranfield among rules meeting every other target:")
        others = [r for r in mine if all(r[c] >= t for c, t in TARGETS.items() if c != "cranfield")
                  and all(r[m] >= t - 1e-9 for m, t in QA_TARGETS.items())]
        for r in sorted(others, key=lambda r: -r["cranfield"])[:3]:
            print(fmt(f"{r['feature']} {r['direction']} {r['t']:.4g}", r))
    return rules


def split_half(data: dict, repeats: int, seed: int = 7) -> None:
    """Overfitting check: pick the rule (feature, direction, t; arm "on") with the best worst-case slack on a
    random half of every set's queries, then score it on the other half. Reports how often the chosen rule
    meets every target on the held-out half, and the mean in-sample vs held-out slack."""
    import numpy as np

    rng = np.random.default_rng(seed)
    sets = (*COLLECTIONS, "qa")
    feats = {n: np.array([[r[f] for f in FEATURES] for r in data[n]], dtype=float) for n in sets}
    off = {n: np.array([r["off"] for r in data[n]], dtype=float) for n in COLLECTIONS}
    on = {n: np.array([r["on"] for r in data[n]], dtype=float) for n in COLLECTIONS}
    qa_off = np.array([r["off"] or 99 for r in data["qa"]])
    qa_on = np.array([r["on"] or 99 for r in data["qa"]])
    rules = []
    for j, feature in enumerate(FEATURES):
        for t in sorted({r[feature] for n in sets for r in data[n]}):
            rules += [(j, ">=", t), (j, "<=", t)]
    cols = np.array([j for j, _d, _t in rules])
    ts = np.array([t for _j, _d, t in rules])
    ge = np.array([d == ">=" for _j, d, _t in rules])

    def decide(n):  # rules x rows
        x = feats[n][:, cols].T
        return np.where(ge[:, None], x >= ts[:, None], x <= ts[:, None])

    def slack(masks):
        worst = np.full(len(rules), np.inf)
        for n in COLLECTIONS:
            m = masks[n]
            d = decide(n)[:, m]
            mean = np.where(d, on[n][m], off[n][m]).mean(axis=1)
            worst = np.minimum(worst, mean - TARGETS[n])
        d = decide("qa")[:, masks["qa"]]
        ranks = np.where(d, qa_on[masks["qa"]], qa_off[masks["qa"]])
        worst = np.minimum(worst, (ranks == 1).mean(axis=1) - QA_TARGETS["success@1"] + 1e-9)
        worst = np.minimum(worst, (ranks <= 5).mean(axis=1) - QA_TARGETS["success@5"] + 1e-9)
        return worst

    picked, held, inside, chosen = 0, [], [], {}
    for _ in range(repeats):
        masks = {n: rng.permutation(len(data[n])) < len(data[n]) // 2 for n in sets}
        a = slack(masks)
        best = int(np.argmax(a))
        b = slack({n: ~m for n, m in masks.items()})[best]
        inside.append(a[best])
        held.append(b)
        picked += b >= 0
        key = f"{FEATURES[rules[best][0]]} {rules[best][1]}"
        chosen[key] = chosen.get(key, 0) + 1
    print(f"\nsplit-half ({repeats} random halves, arm 'on'): best rule's worst-case slack in-sample "
          f"{np.mean(inside):+.4f}, held-out {np.mean(held):+.4f}; held-out half meets every target "
          f"{picked}/{repeats}; rules chosen: {dict(sorted(chosen.items(), key=lambda kv: -kv[1]))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=("collect", "analyse"))
    parser.add_argument("--out", default="/tmp/selexp")
    parser.add_argument("--split-half", type=int, default=50, help="random halves for the overfitting check")
    parser.add_argument("--collections", nargs="+", default=list(COLLECTIONS) + ["qa"])
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "per_query.json"
    if args.step == "collect":
        data = json.loads(path.read_text()) if path.exists() else {}
        for name in args.collections:
            data[name] = collect_qa() if name == "qa" else collect_collection(name)
            path.write_text(json.dumps(data, indent=1))
        return
    data = json.loads(path.read_text())
    rules = analyse(data)
    if args.split_half:
        split_half(data, args.split_half)
    (out / "rules.json").write_text(json.dumps(rules, indent=1))


if __name__ == "__main__":
    main()
