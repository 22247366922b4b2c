"""kx's own embedding model served over OpenAI's embeddings API: `python -m engine.embedding.openai_server`.

`POST /embeddings` ({"model", "input": str | [str]}) answers OpenAI's shape;
`GET /models` lists the one model served. It serves the model kx itself
would load (KX_SERVE_EMBED_MODEL, default the bundled all-MiniLM-L6-v2) on
kx's own runtime (ONNX Runtime), so a bigger machine can embed for a laptop
(`KX_SERVE_EMBED_MODEL=openai:NAME@http://that-machine:PORT` there), and the
tests and benchmarks/embed_endpoints.py have a real server to talk to without
installing one. Standard library HTTP (one thread per connection; the
model's encode runs one request at a time, so two requests never fight over
the same cores). It binds loopback unless told otherwise and has no key:
put it behind something that checks one before exposing it.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..config import ENV

MAX_INPUTS = 2048
MAX_BODY = 64 * 2**20


def _handler(embedder: Any, name: str, lock: threading.Lock) -> type[BaseHTTPRequestHandler]:
    answered = {"requests": 0, "inputs": 0}  # shown in /models' stats: which server of several did the work

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  # quiet: the caller logs
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/models", "/v1/models"):
                self._send(200, {"object": "list", "data": [
                    {"id": name, "object": "model", "owned_by": "kx", "capabilities": ["embed"],
                     "stats": dict(answered)}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            if self.path.rstrip("/") not in ("/embeddings", "/v1/embeddings"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            length = int(self.headers.get("content-length") or 0)
            if length > MAX_BODY:
                self._send(413, {"error": {"message": "request too large"}})
                return
            try:
                body = json.loads(self.rfile.read(length))
                texts = body["input"]
                texts = [texts] if isinstance(texts, str) else texts
                if body.get("model") not in (name, None) or not isinstance(texts, list) or not texts \
                        or len(texts) > MAX_INPUTS or not all(isinstance(t, str) for t in texts):
                    raise ValueError
            except (ValueError, KeyError, TypeError):
                self._send(400, {"error": {"message": f"expected {{\"model\": \"{name}\", \"input\": "
                                                      f"[up to {MAX_INPUTS} strings]}}"}})
                return
            with lock:
                vectors = embedder.encode(texts, batch_size=len(texts))
                answered["requests"] += 1
                answered["inputs"] += len(texts)
            data = [{"object": "embedding", "index": i, "embedding": [float(x) for x in row]}
                    for i, row in enumerate(vectors)]
            self._send(200, {"object": "list", "model": name, "data": data,
                             "usage": {"prompt_tokens": 0, "total_tokens": 0}})

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            raw = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.embedding.openai_server",
                                     description="Serve kx's embedding model on OpenAI's /embeddings API.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7997, help="0: any free port (printed)")
    parser.add_argument("--model", default=None, help=f"a {ENV.embed_model} value (default: the setting's)")
    parser.add_argument("--name", default=None, help="the model id served (default: the model's own name)")
    args = parser.parse_args(argv)

    from ..config import load_settings
    from .cards import model_card_for
    from .embedders import load_embedder

    settings = load_settings({"embed_model": args.model} if args.model else None)
    card = model_card_for(settings.embed_model)
    embedder = load_embedder(card, settings)
    if card is None or embedder is None or card.endpoint:
        print("serve a model on this machine (not 'none', not another served model)", file=sys.stderr)
        return 2
    embedder.encode(["warm up"])  # loads it (a first use exports the ONNX graph) before the port opens
    name = args.name or card.name
    server = ThreadingHTTPServer((args.host, args.port), _handler(embedder, name, threading.Lock()))
    server.daemon_threads = True
    print(f"serving {name} ({card.dimension}-d) on http://{args.host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
