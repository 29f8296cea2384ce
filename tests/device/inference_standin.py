"""The inference server's stand-in on a GPU machine: like vLLM in the walkthrough, a process that uses a GPU
without asking the scheduler for one (it is in no pod, so in no ledger). It holds GPU memory through PyTorch
and answers /health and /v1/models on 127.0.0.1.

  python3 inference_standin.py [--port 18000] [--gib 8] [--device 0]
"""
from __future__ import annotations

import argparse
import http.server
import json
import os

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=18000)
    parser.add_argument("--gib", type=float, default=8.0)
    parser.add_argument("--device", type=int, default=0)
    args = parser.parse_args()
    # Plain device memory (cudaMalloc through PyTorch's allocator), as a model's weights would take.
    weights = torch.ones(int(args.gib * 2**30), dtype=torch.uint8, device=f"cuda:{args.device}")
    torch.cuda.synchronize()
    held = torch.cuda.memory_reserved(args.device)
    print(json.dumps({"pid": os.getpid(), "device": args.device, "reserved_bytes": held,
                      "gpu": torch.cuda.get_device_name(args.device)}), flush=True)

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, fmt, *values):  # pylint: disable=arguments-differ
            pass

        def do_GET(self):  # pylint: disable=invalid-name
            if self.path == "/health":
                body, status = b"", 200
            elif self.path == "/v1/models":
                body, status = json.dumps({"object": "list", "data": [{"id": "standin", "object": "model"}]}).encode(), 200
            else:
                body, status = b"not found", 404
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.weights = weights   # kept alive as long as the server
    server.serve_forever()


if __name__ == "__main__":
    main()
