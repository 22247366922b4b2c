"""The longest silence of an ingest's progress, with two busy processes beside it (issue 41 item 3).

    nice -n 10 python benchmarks/progress_gaps.py [--files 40] [--busy 2]

Two measurements, each while `--busy` processes spin on the CPU (`python -c "while True: pass"`, a
`stress`-style load on a 2-core machine):

- `off a terminal`: `kx datasets ingest` of `--files` Markdown files (the handbook's text, ~2 KB each)
  into a fresh home whose model cache is already prepared, stderr a pipe: when the first plain progress line
  came (s after the process started) and the longest gap between two (target: first within 2 s of the
  work beginning, then every 5 s);
- `embedding events`: the same documents through the engine in this process, the time between two
  embedding progress events (what moves the bar on a terminal; target: at least every 2 s).

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, cpu_name


def _files(folder: Path, count: int) -> None:
    texts = [p.read_text() for p in sorted((REPO / "samples" / "handbook").glob("*.md"))]
    folder.mkdir(parents=True)
    for i in range(count):
        (folder / f"doc-{i:03d}.md").write_text(f"# Copy {i}\n\n" + texts[i % len(texts)])


def _gaps(times: list[float]) -> float:
    return max((b - a for a, b in zip(times, times[1:])), default=0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--busy", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=None,
                        help="a prepared model cache (KX_MODEL_CACHE); default: prepare one first")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _files(root / "docs", args.files)
        cache = args.cache or root / "models"
        env = {**os.environ, "PYTHONPATH": str(REPO), "KX_MODEL_CACHE": str(cache)}
        if args.cache is None:   # the one-time export, before the load starts
            subprocess.run([sys.executable, "-m", "kx_tui", "models", "prepare"], env={**env, "KX_HOME": tmp},
                           check=True, capture_output=True)
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
        try:
            started = time.monotonic()
            proc = subprocess.Popen([sys.executable, "-m", "kx_tui", "datasets", "ingest", "bench", str(root / "docs")],
                                    env={**env, "KX_HOME": str(root / "home")}, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
            assert proc.stderr is not None
            lines = [time.monotonic() - started for line in proc.stderr if line.startswith("kx: ")]
            assert proc.wait() == 0
            took = time.monotonic() - started

            sys.path.insert(0, str(REPO))
            from engine import Engine, load_settings
            from engine.records import Progress
            from engine.text.inputs import from_file

            engine = Engine(load_settings({"home": str(root / "home-2"), "model_cache": str(cache)}))
            events: list[float] = []
            began = time.monotonic()

            def on_event(event: object) -> None:
                if isinstance(event, Progress) and event.stage == "embedding":
                    events.append(time.monotonic() - began)

            docs = [from_file(p, 10**7) for p in sorted((root / "docs").iterdir())]
            engine.ingest("bench", docs, on_event=on_event)
            engine.close()
        finally:
            for p in busy:
                p.kill()
                p.wait()
    print(json.dumps({
        "cpu": cpu_name(), "cores": len(os.sched_getaffinity(0)), "load_average": round(os.getloadavg()[0], 1),
        "busy_processes": args.busy, "files": args.files,
        "off_a_terminal": {"run_s": round(took, 1), "lines": len(lines),
                           "first_line_s_after_process_start": round(lines[0], 2) if lines else None,
                           "largest_gap_s": round(_gaps(lines), 2)},
        "embedding_events": {"count": len(events), "first_s": round(events[0], 2) if events else None,
                             "largest_gap_s": round(_gaps(events), 2)},
    }, indent=2))


if __name__ == "__main__":
    main()
