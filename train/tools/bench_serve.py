"""Load on `hallu serve`: N concurrent clients on loopback against one export, beside the command.

    python -m train.tools.bench_serve [--export DIR] [--rows-file ROWS.jsonl] [--clients 8] [--rows 200]

By default the export is the MiniLM span head of `train.tools.bench`'s product section (untrained:
speed does not depend on the weights) and the rows are that section's RAGTruth-sized ones (a median
RAGTruth source and response, two 512-token windows a row). Three measures on the same rows: the rows/s of
`Annotator.annotate_rows` in this process with the export's batch settings (what `hallu annotate`
spends per row, file writing aside); the server answering one request of one row at a time (rows/s, p50
/ p95 latency); and `--clients` threads each sending one row a request (rows/s, p50 / p95). Every
served answer is checked against the in-process row (labels, spans and text equal, scores within
1e-5): a row lost or changed is counted and reported, never skipped.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from eval.annotate import Annotator
from eval.tolerance import within_tolerance
from train.distributed import free_port
from train.tools.bench import ONE_WINDOW_SOURCE_CHARS, ragtruth_sized_rows

REPO = Path(__file__).resolve().parents[2]
def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def start_server(export: str, port: int, threads: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "eval.serve", export, "--port", str(port)], cwd=REPO,
                            env={**os.environ, "OMP_NUM_THREADS": str(threads)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)
    if not answers_health(f"http://127.0.0.1:{port}", proc, within_s=300):
        proc.kill()
        raise SystemExit(f"eval.serve {export} did not answer /health within 300 s (exit code {proc.poll()})")
    return proc


def answers_health(url: str, proc: subprocess.Popen, within_s: float) -> bool:
    """Whether the server `proc` answers `url`/health within `within_s` while it runs. One client polls:
    making one costs 75 ms of the CPU the server is starting on."""
    deadline = time.time() + within_s
    with httpx.Client(timeout=1) as poll:
        while time.time() < deadline and proc.poll() is None:
            try:
                if poll.get(f"{url}/health").status_code == 200:
                    return True
            except httpx.TransportError:
                time.sleep(0.2)
    return False


def served(url: str, rows: list[dict], clients: int) -> dict:
    """Rows sent one a request by `clients` threads: the answers in row order, rows/s and latencies. The
    threads share one HTTP client that keeps its connections open, as a program calling the server would
    (a client made for each request spent the 2 cores' time on TLS setup and connecting that the server
    then lacked)."""
    latencies: list[float] = [0.0] * len(rows)
    answers: list[dict | None] = [None] * len(rows)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    with httpx.Client(base_url=url, timeout=600, limits=limits) as http:
        def ask(i: int) -> None:
            t0 = time.perf_counter()
            r = http.post("/v1/annotate", json=rows[i])
            latencies[i] = time.perf_counter() - t0
            answers[i] = r.json() if r.status_code == 200 else None

        t0 = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            list(pool.map(ask, range(len(rows))))
        wall = time.perf_counter() - t0
    return {"answers": answers, "rows_per_s": len(rows) / wall, "p50_ms": 1000 * statistics.median(latencies),
            "p95_ms": 1000 * _percentile(latencies, 0.95), "wall_s": wall}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--export", help="an export directory (default: the bench's MiniLM span head)")
    p.add_argument("--rows-file", help="JSONL rows {source | documents, response, ...} (default: RAGTruth-sized)")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--rows", type=int, default=200, help="the first N rows of the file")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads, both sides")
    p.add_argument("--out", default="bench_serve.json")
    args = p.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        export = args.export or _minilm_spans(Path(tmp) / "minilm_spans")
        rows = _rows(args.rows_file, args.rows)
        one_window = None if args.rows_file else ragtruth_sized_rows(min(args.rows, 50), ONE_WINDOW_SOURCE_CHARS)
        result = measure(export, rows, args.clients, args.threads, one_window)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")


def _minilm_spans(directory: Path) -> str:
    """MiniLM with an untrained span head, saved with the head's weights: every process that loads the
    export then reads the same head (a head left out of the files would be drawn anew in each)."""
    import torch

    from models.annotator import hf_model, load_annotator
    from models.builders import resolve_model_path
    from models.export_spec import AnnotatorSpec

    shutil.copytree(resolve_model_path("embedded:minilm"), directory)
    torch.manual_seed(0)
    hf_model(load_annotator(str(directory), "spans")).save_pretrained(directory)
    AnnotatorSpec("spans", "binary", "prompt_e", 0, "spans", "en", 512, 0, ["faithful", "hallucinated"],
                  threshold=0.5).save(directory)
    return str(directory)


def _rows(path: str | None, n: int) -> list[dict]:
    if path is None:
        return ragtruth_sized_rows(n)
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()[:n]]
    return [{k: r[k] for k in ("id", "source", "documents", "question", "response") if k in r} for r in rows]


def measure(export: str, rows: list[dict], clients: int, threads: int, one_window: list[dict] | None) -> dict:
    """The three measures (and, given `one_window` rows, one client's latency on rows of one window)."""
    annotator = Annotator.load(export)
    annotator.annotate_rows(rows[:2])                                    # warm-up
    t0 = time.perf_counter()
    reference = annotator.annotate_rows(rows)
    command_rate = len(rows) / (time.perf_counter() - t0)
    del annotator
    port = free_port()
    server = start_server(export, port, threads)
    try:
        url = f"http://127.0.0.1:{port}"
        served(url, rows[:2], 1)                                         # warm-up
        runs = {"one_client": served(url, rows, 1), f"{clients}_clients": served(url, rows, clients)}
        if one_window:
            window = served(url, one_window, 1)
            window.pop("answers")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=120)
    result = {"export": export, "rows": len(rows), "threads": threads, "command_rows_per_s": command_rate}
    if one_window:
        result["one_window_one_client"] = window
    print(f"| measure ({len(rows)} rows, {threads} threads) | rows/s | p50 ms | p95 ms | lost or changed |")
    print("|---|---|---|---|---|")
    print(f"| in process, as `hallu annotate` | {command_rate:.1f} | - | - | - |")
    for name, run in runs.items():
        bad = sum(a is None or not within_tolerance(a, r) for a, r in zip(run.pop("answers"), reference))
        result[name] = run | {"lost_or_changed": bad}
        print(f"| served, {name.replace('_', ' ')} | {run['rows_per_s']:.1f} | {run['p50_ms']:.0f} | "
              f"{run['p95_ms']:.0f} | {bad} |")
    if one_window:
        print(f"| served, one client, rows of one 512-token window | {window['rows_per_s']:.1f} | "
              f"{window['p50_ms']:.0f} | {window['p95_ms']:.0f} | - |")
    return result


if __name__ == "__main__":
    main()
