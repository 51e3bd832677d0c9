"""`hallu serve` started on a free loopback port for a test, and asked as a client asks."""
import json
import os
import signal
import subprocess
import sys

import httpx

from tests.conftest import REPO, free_port
from train.tools.bench_serve import answers_health


class Server:
    def __init__(self, export, *args: str, env: dict | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([sys.executable, "-m", "eval.serve", str(export), "--port", str(self.port), *args],
                                     cwd=REPO, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        assert answers_health(self.url, self.proc, within_s=120), self.stop()

    def post(self, payload, **kw) -> httpx.Response:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return httpx.post(f"{self.url}/v1/annotate", content=body, timeout=kw.pop("timeout", 60),
                          headers={"content-type": "application/json", **kw.pop("headers", {})}, **kw)

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=60)
        return out


def served_rows(export, rows: list[dict]) -> list[dict]:
    """The rows a fresh server on `export` answers for `rows` in one request (it is stopped after)."""
    server = Server(export)
    try:
        answered = server.post(rows, timeout=600)
        assert answered.status_code == 200, answered.text
        return answered.json()
    finally:
        server.stop()
