"""How long a TAB takes: `kx completion bash`'s script against click's own callback and a bare interpreter.

    nice -n 10 python benchmarks/completion.py [--tabs 40] [--datasets 30]

Three timings, taking turns, over a KX_HOME of `--datasets` datasets (folders with a catalogue: what the
script reads):

- `bash script`: one TAB in an interactive shell, `kx datasets query h<TAB>` — the sourced script's
  function called `--tabs` times in one bash (a shell is already running when a user presses TAB), ms each;
- `click callback`: the same TAB through click's completion (what `kx completion zsh|fish` still use):
  `_KX_COMPLETE=bash_complete python -m kx_tui`, a process per TAB;
- `python -c pass`: the bare interpreter, a process per run — the floor of anything that starts Python.

The figure to hold: the script's TAB well under 100 ms, and under `python -c pass` in the same run (it starts
no Python). Prints one JSON object; medians over the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, cpu_name


def _timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tabs", type=int, default=40, help="TABs per measurement")
    parser.add_argument("--datasets", type=int, default=30, help="datasets in the home the script reads")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        for i in range(args.datasets):   # what the script looks at: a folder holding a catalogue
            folder = Path(home) / "datasets" / f"{'hr' if i % 2 else 'handbook'}-{i:03d}"
            folder.mkdir(parents=True)
            (folder / "catalog.sqlite").write_bytes(b"")
        env = {**os.environ, "KX_HOME": home, "PYTHONPATH": str(REPO)}
        script = subprocess.run([sys.executable, "-m", "kx_tui", "completion", "bash"], env=env, check=True,
                                capture_output=True, text=True).stdout
        line = "kx datasets query h"
        loop = (f"{script}\nCOMP_WORDS=(kx datasets query h); COMP_CWORD=3; COMP_LINE='{line}'; "
                f"COMP_POINT={len(line)}\n"
                f"s=$EPOCHREALTIME; for ((i=0;i<{args.tabs};i++)); do _kx_completion kx h query; done; "
                "e=$EPOCHREALTIME; echo \"${#COMPREPLY[@]} $s $e\"\n")
        click_env = {**env, "_KX_COMPLETE": "bash_complete", "COMP_WORDS": line, "COMP_CWORD": "3"}
        script_ms, click_ms, bare_ms = [], [], []
        for _ in range(args.rounds):
            out = subprocess.run(["bash", "--norc", "--noprofile", "-c", loop], env=env, capture_output=True,
                                 text=True, check=True).stdout.split()
            assert int(out[0]) == args.datasets, out   # every dataset offered
            script_ms.append((float(out[2]) - float(out[1])) * 1000 / args.tabs)
            click_ms.append(1000 * _timed([sys.executable, "-m", "kx_tui"], click_env))
            bare_ms.append(1000 * _timed([sys.executable, "-c", "pass"], env))
    result = {
        "cpu": cpu_name(), "cores": len(os.sched_getaffinity(0)), "load_average": os.getloadavg()[0],
        "datasets": args.datasets, "tabs": args.tabs, "rounds": args.rounds,
        "bash_script_ms": round(statistics.median(script_ms), 2),
        "click_callback_ms": round(statistics.median(click_ms), 1),
        "python_c_pass_ms": round(statistics.median(bare_ms), 1),
    }
    result["script_vs_python_c_pass"] = round(result["bash_script_ms"] / result["python_c_pass_ms"], 3)
    result["click_vs_python_c_pass"] = round(result["click_callback_ms"] / result["python_c_pass_ms"], 2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
