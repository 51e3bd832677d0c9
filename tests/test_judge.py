"""eval.backend=openai against a real OpenAI-compatible server: `transformers serve` on 127.0.0.1
serving the embedded SmolLM2-135M-Instruct. Greedy answers equal the in-process ones; a second run is
answered from the cache (no request reaches the server); the API key is in no file of the run."""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from data_builders.schema import write_jsonl
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


def _requests(log: Path) -> int:
    return log.read_text().count("POST /v1/chat/completions")


def _records(root: Path) -> None:
    rows = [{"id": f"r{i}", "task": "summarization", "language": "zh", "label": i % 2, "spans": [],
             "source": f"林远在第{i}天走进书房。他拿起那本旧书。窗外下着雨。",
             "response": f"林远在第{i + i % 2}天走进书房。"}
            for i in range(4)]
    write_jsonl(root / "test.jsonl", rows)
    write_jsonl(root / "train.jsonl", rows[:1])


def _eval(out: Path, data: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    args = ["+exp=longnovel_curriculum_demo", "model.name_or_path=embedded:smollm2-135m", "data.source=records",
            f"data.root={data}", "task.evidence_sentences=0", "task.template=prompt_e", "eval.buckets=[all]",
            "eval.max_new_tokens=12", "trainer.progress=false", f"output_dir={out}", *extra]
    return subprocess.run([sys.executable, str(REPO / "eval" / "run.py"), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env={**os.environ, **(env or {})})


def _outputs(run: Path) -> dict:
    return {r["id"]: r["output"] for r in map(json.loads, (run / "predictions.jsonl").read_text().splitlines())}


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


def test_a_training_run_refuses_the_served_judge_for_its_own_final_evaluation():
    from hydra import compose, initialize_config_dir

    from configs.schema import typed
    from data_builders.sources import DataError
    from train.data import check_run_config

    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base="1.3"):
        cfg = typed(compose("sft", overrides=["+exp=longnovel_curriculum_demo", "eval.backend=openai"]))
    with pytest.raises(DataError, match="eval/run.py"):
        check_run_config(cfg, 2)
