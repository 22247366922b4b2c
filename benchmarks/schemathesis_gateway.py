"""Schemathesis campaign against the gateway: >= 100 schema-valid examples per operation.

    python benchmarks/schemathesis_gateway.py [--examples 100] [--seed 0]

The real gateway app (engine/server/gateway.py) over a real engine with the tiny
deterministic embedder, in-process through ASGI; tests/schema_campaign.py
holds the campaign and says what each count means. Exit 1 when any server
error, schema-valid request rejected for its shape, nonconforming answer or
refusal not shaped {code, message} was found. tests/test_gateway.py runs the
same at 25 examples per operation.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=100, help="examples per operation (default 100)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kx-schemathesis-") as home:
        os.environ["KX_HOME"] = home
        from tests.schema_campaign import build_app, run_campaign, summary

        engine, app = build_app()
        started = time.monotonic()
        result = run_campaign(app, args.examples, args.seed)
        engine.close()
        print(summary(result))
        print(f"{sum(result.examples.values())} requests over {len(result.examples)} operations in "
              f"{time.monotonic() - started:.0f} s")
        bad = result.server_errors or result.rejected_valid or result.nonconforming or result.bad_errors
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
