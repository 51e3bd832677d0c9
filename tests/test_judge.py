"""eval.backend=openai against a real OpenAI-compatible server: `transformers serve` on 127.0.0.1
serving the embedded SmolLM2-135M-Instruct. Greedy answers equal the in-process ones; a second run is
answered from the cache (no request reaches the server); the API key is in no file of the run.
The runs ask SummEdits' zero-shot question (about 180 SmolLM2 tokens a row): Prompt-E's Chinese
instructions are about 2,400, a 10-second prefill per request on a 2-core CPU."""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from data_builders.records import write_jsonl
from models.builders import resolve_model_path
from tests.conftest import REPO

pytest.importorskip("openai")
pytest.importorskip("fastapi")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    model = resolve_model_path("embedded:smollm2-135m")
    port, log = _free_port(), tmp_path_factory.mktemp("serve") / "server.log"
    cli = Path(sys.executable).parent / "transformers"
    with open(log, "w") as out:
        proc = subprocess.Popen([str(cli), "serve", model, "--host", "127.0.0.1", "--port", str(port),
                                 "--device", "cpu"], stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 180
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    pytest.fail(f"transformers serve did not start:\n{log.read_text()[-3000:]}")
                time.sleep(1)
        yield f"http://127.0.0.1:{port}/v1", model, log
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _requests(log: Path, route: str = "chat/completions") -> int:
    return log.read_text().count(f"POST /v1/{route} ")


def _records(root: Path) -> None:
    rows = [{"id": f"r{i}", "task": "summarization", "language": "zh", "label": i % 2, "spans": [],
             "source": f"林远在第{i}天走进书房。他拿起那本旧书。窗外下着雨。",
             "response": f"林远在第{i + i % 2}天走进书房。"}
            for i in range(4)]
    write_jsonl(root / "test.jsonl", rows)
    write_jsonl(root / "train.jsonl", rows[:1])


def _eval(out: Path, data: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    args = ["+exp=longnovel_curriculum_demo", "model.name_or_path=embedded:smollm2-135m", "data.source=records",
            f"data.root={data}", "task.evidence_sentences=0", "task.template=consistency", "eval.buckets=[all]",
            "eval.max_new_tokens=12", "trainer.progress=false", f"output_dir={out}", *extra]
    return subprocess.run([sys.executable, str(REPO / "eval" / "run.py"), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env={**os.environ, **(env or {})})


def _outputs(run: Path) -> dict:
    return {r["id"]: r["output"] for r in map(json.loads, (run / "predictions.jsonl").read_text().splitlines())}


@pytest.mark.over_budget("the demo export evaluated in process, through transformers serve and from the cache")
def test_served_greedy_answers_equal_in_process_ones_and_a_rerun_sends_nothing(server, tmp_path):
    url, model, log = server
    data = tmp_path / "data"
    _records(data)
    local = _eval(tmp_path / "hf", data)
    assert local.returncode == 0, local.stderr[-3000:]
    key = "sk-test-" + os.urandom(8).hex()
    judge = ["eval.backend=openai", f"eval.judge.base_url={url}", f"eval.judge.model={model}",
             f"eval.judge.cache_dir={tmp_path / 'cache'}", "eval.judge.api_key_env=JUDGE_TEST_KEY"]
    before = _requests(log)
    served = _eval(tmp_path / "served", data, *judge, env={"JUDGE_TEST_KEY": key})
    assert served.returncode == 0, served.stderr[-3000:]
    assert _outputs(tmp_path / "served") == _outputs(tmp_path / "hf")
    assert _requests(log) - before == 4
    assert "HTTP Request" not in served.stdout + served.stderr      # no log line per request
    usage = json.loads((tmp_path / "served" / "judge_usage.json").read_text())
    assert (usage["requests"], usage["cached"]) == (4, 0) and usage["prompt_tokens"] > 0

    again = _eval(tmp_path / "again", data, *judge, env={"JUDGE_TEST_KEY": key})
    assert again.returncode == 0, again.stderr[-3000:]
    assert _requests(log) - before == 4                  # every answer came from the cache
    assert _outputs(tmp_path / "again") == _outputs(tmp_path / "hf")
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written and not [p for p in written if key in p.read_text(errors="ignore")]


def test_a_missing_key_or_an_unreachable_server_is_one_line(server, tmp_path):
    url, _, _ = server
    data = tmp_path / "data"
    _records(data)
    base = ["eval.backend=openai", f"eval.judge.base_url={url}", f"eval.judge.cache_dir={tmp_path / 'cache'}"]
    env = {k: v for k, v in os.environ.items() if k != "JUDGE_TEST_KEY"}
    no_key = _eval(tmp_path / "a", data, *base, "eval.judge.model=m", "eval.judge.api_key_env=JUDGE_TEST_KEY",
                   env=env)
    assert no_key.returncode != 0 and "JUDGE_TEST_KEY is not set" in no_key.stderr
    down = _eval(tmp_path / "b", data, "eval.backend=openai", "eval.judge.base_url=http://127.0.0.1:9/v1",
                 "eval.judge.model=m", "eval.judge.max_retries=1", f"eval.judge.cache_dir={tmp_path / 'cache'}")
    assert down.returncode != 0 and "did not answer" in down.stderr and "127.0.0.1:9" in down.stderr
    assert "Traceback" not in no_key.stderr + down.stderr


def test_a_training_run_refuses_the_served_judge_for_its_own_final_evaluation():
    from hydra import compose, initialize_config_dir

    from configs.rules import ConfigError
    from configs.schema import typed
    from train.data import check_run_config

    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base="1.3"):
        cfg = typed(compose("sft", overrides=["+exp=longnovel_curriculum_demo", "eval.backend=openai"]))
    with pytest.raises(ConfigError, match="eval/run.py"):
        check_run_config(cfg, 2)


class FaultyProxy:
    """A real HTTP endpoint in front of the server that answers the first requests with the given
    statuses (429, 500, ...), then forwards; after `stop_after` forwarded requests it dies (the server
    dying mid-run): every later connection is dropped unanswered and the listener closes. It counts what
    reached the server, per request body."""

    def __init__(self, upstream: str, port: int, faults=(), stop_after: int | None = None):
        import threading
        from collections import Counter
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.faults, self.stop_after, self.answered, self.forwarded = list(faults), stop_after, [], Counter()
        self.sent, lock, self.stopped = 0, threading.Lock(), threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _dead(self) -> bool:
                # Decided before forwarding, under a lock: a request that arrives while the listener is
                # still shutting down must not reach the server (the client retries at once).
                with lock:
                    if proxy.stop_after is not None and proxy.sent >= proxy.stop_after:
                        return True
                    proxy.sent += 1
                    return False

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if not proxy.faults and self._dead():
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if proxy.faults:
                    status = proxy.faults.pop(0)
                    proxy.answered.append(status)
                    return self._reply(status, b'{"error": {"message": "injected"}}')
                request = urllib.request.Request(upstream + self.path.removeprefix("/v1"), data=body,
                                                 headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=300) as r:
                    answer = r.read()
                proxy.forwarded[json.dumps(json.loads(body)["messages"])] += 1
                proxy.answered.append(200)
                self._reply(200, answer)
                if proxy.stop_after is not None and sum(proxy.forwarded.values()) >= proxy.stop_after:
                    threading.Thread(target=proxy.stop).start()

            def _reply(self, status: int, payload: bytes):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{port}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.stopped.set()


def _judge(proxy_url: str, model: str, cache: Path) -> list[str]:
    return ["eval.backend=openai", f"eval.judge.base_url={proxy_url}", f"eval.judge.model={model}",
            f"eval.judge.cache_dir={cache}", "eval.judge.concurrency=1"]


def test_429_and_500_are_retried_with_backoff_and_no_prompt_reaches_the_server_twice(server, tmp_path):
    url, model, _ = server
    data = tmp_path / "data"
    _records(data)
    proxy = FaultyProxy(url, _free_port(), faults=[429, 429, 500])
    try:
        run = _eval(tmp_path / "run", data, *_judge(proxy.url, model, tmp_path / "cache"))
    finally:
        proxy.stop()
    assert run.returncode == 0, run.stderr[-3000:]
    assert proxy.answered[:3] == [429, 429, 500] and proxy.answered.count(200) == 4
    assert len(proxy.forwarded) == 4 and set(proxy.forwarded.values()) == {1}
    assert json.loads((tmp_path / "run" / "judge_usage.json").read_text())["requests"] == 4


def test_a_server_that_dies_mid_run_stops_it_in_one_line_and_the_rerun_sends_only_the_rest(server, tmp_path):
    url, model, _ = server
    data = tmp_path / "data"
    _records(data)
    port = _free_port()
    judge = _judge(f"http://127.0.0.1:{port}/v1", model, tmp_path / "cache") + ["eval.judge.max_retries=1"]
    first = FaultyProxy(url, port, stop_after=2)
    died = _eval(tmp_path / "run", data, *judge)
    assert died.returncode != 0 and f"127.0.0.1:{port}" in died.stderr and "did not answer" in died.stderr
    assert "Traceback" not in died.stderr, died.stderr[-4000:]
    assert sum(first.forwarded.values()) == 2 and first.stopped.wait(30)
    second = FaultyProxy(url, port)
    try:
        resumed = _eval(tmp_path / "run", data, *judge)
    finally:
        second.stop()
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert sum(second.forwarded.values()) == 2 and not set(first.forwarded) & set(second.forwarded)
    assert len(_outputs(tmp_path / "run")) == 4


def _annotate(export: Path, rows: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eval.annotate", f"model={export}", f"input={rows}", f"output={out}",
                           "progress=false", *extra], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_eval_annotate_labels_with_the_served_copy_of_an_export_as_in_process(server, tmp_path):
    """The export says how to prompt and read (annotator.json); the endpoint serving its weights answers."""
    from models.export_spec import AnnotatorSpec

    url, model, log = server
    export = tmp_path / "export"
    export.mkdir()
    for f in Path(model).iterdir():
        (export / f.name).symlink_to(f)
    AnnotatorSpec("generative", "binary", "consistency", 0, "summedits", "zh", 8192, 12,
                  ["faithful", "hallucinated"]).save(export)
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"id": f"u{i}", "source": f"林远在第{i}天走进书房。窗外下着雨。",
                                        "response": f"林远在第{i + 1}天走进书房。"}, ensure_ascii=False) + "\n"
                            for i in range(3)))
    local = _annotate(export, rows, tmp_path / "local.jsonl")
    assert local.returncode == 0, local.stderr[-3000:]
    before = _requests(log)
    served = _annotate(export, rows, tmp_path / "served.jsonl", "backend=openai", f"judge.base_url={url}",
                       f"judge.model={model}", f"judge.cache_dir={tmp_path / 'cache'}")
    assert served.returncode == 0, served.stderr[-3000:]
    assert _requests(log) - before == 3
    assert (tmp_path / "served.jsonl").read_text() == (tmp_path / "local.jsonl").read_text()


@pytest.mark.over_budget("SmolLM2 on 1,700-token prompts three times: served, in process, and from the cache")
def test_uhgevals_keyword_judge_served_as_plain_text_answers_as_in_process_and_a_rerun_asks_nothing(server, tmp_path):
    """`+exp=uhgeval_judge` with eval.judge.completions: one request per keyword UHGEval's metric reads (about
    1,700 SmolLM2 tokens each), the plain-text prompt in process reads, the same greedy answers, every one cached."""
    from tests.test_uhgeval_judge import _records as uhgeval_items

    url, model, log = server
    data = tmp_path / "data"
    write_jsonl(data / "test.jsonl", uhgeval_items(tmp_path))

    def judged(out: Path, *extra: str) -> dict:
        run = subprocess.run([sys.executable, str(REPO / "eval" / "run.py"), "+exp=uhgeval_judge", f"data.root={data}",
                              f"model.name_or_path={model}", "eval.max_new_tokens=12", "trainer.progress=false",
                              f"output_dir={out}", *extra], cwd=REPO, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]
        return {r["id"]: r for r in map(json.loads, (out / "predictions.jsonl").read_text().splitlines())}

    served = [*_judge(url, model, tmp_path / "cache"), "eval.judge.completions=true"]
    before = _requests(log, "completions")
    rows = judged(tmp_path / "run", *served)
    item = rows["uhgeval-doc_1"]
    assert item["keywords"] == ["张三", "三月", "表示", "北京"] and _requests(log, "completions") - before == 4
    local = judged(tmp_path / "local")
    assert [rows[k]["keyword_outputs"] for k in sorted(rows)] == [local[k]["keyword_outputs"] for k in sorted(local)]
    assert item["keyword_labels"] == local["uhgeval-doc_1"]["keyword_labels"]
    assert json.loads((tmp_path / "run" / "judge_usage.json").read_text())["requests"] == 4
    assert judged(tmp_path / "again", *served) == rows and _requests(log, "completions") - before == 4


def test_a_system_prompt_with_the_completions_route_is_refused():
    from configs.schema import JudgeConfig
    from eval.backends.served import Judge, JudgeError

    config = JudgeConfig(base_url="http://127.0.0.1:9/v1", model="m", completions=True, system_prompt="Be terse.")
    with pytest.raises(JudgeError, match="system_prompt is a chat message; with eval.judge.completions=true"):
        Judge(config, 8)
