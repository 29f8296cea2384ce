"""A vLLM-like inference server on 127.0.0.1 for the simulated cluster.

GET /health answers as vLLM does (200, empty body); GET /v1/models lists one model (and, like vLLM's
--api-key, wants a bearer token when one is configured). Tests switch the behaviour through a mode
file that is read on every request: `ok`, `503` (engine dead), `slow` (answers after 3 s). `down` is
done by stopping this process (simctl vllm down).
"""
from __future__ import annotations

import argparse
import http.server
import json
import socketserver
import time
from pathlib import Path

MODEL = "Qwen/Qwen2.5-7B-Instruct"


class Handler(http.server.BaseHTTPRequestHandler):
    mode_file: Path = None
    api_key: str = ""

    def log_message(self, fmt, *args):  # pylint: disable=arguments-differ
        pass

    def _mode(self) -> str:
        try:
            return self.mode_file.read_text().strip() or "ok"
        except OSError:
            return "ok"

    def do_GET(self):  # pylint: disable=invalid-name
        mode = self._mode()
        if mode == "slow":
            time.sleep(3)
        if self.path == "/health":
            return self._send(503 if mode == "503" else 200, b"")
        if self.path == "/v1/models":
            if self.api_key and self.headers.get("Authorization") != f"Bearer {self.api_key}":
                return self._send(401, json.dumps({"error": "Unauthorized"}).encode(), "application/json")
            if mode == "503":
                return self._send(503, b"")
            body = {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "vllm", "max_model_len": 32768}]}
            return self._send(200, json.dumps(body).encode(), "application/json")
        return self._send(404, json.dumps({"detail": "Not Found"}).encode(), "application/json")

    def _send(self, code: int, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode-file", type=Path, required=True)
    parser.add_argument("--api-key", default="")
    args = parser.parse_args()
    Handler.mode_file, Handler.api_key = args.mode_file, args.api_key
    Server(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
