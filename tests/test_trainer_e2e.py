"""The trainer under torchrun with gloo and DeepSpeed ZeRO-3 CPU offload (slow: ~2-3 minutes)."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import REPO, torchrun
from train.run_dir import LOG_FIELDS, read_train_log

pytestmark = pytest.mark.slow

SMALL = [
    "parallel=none", "trainer.progress=false", "logger.wandb=false",
    "data.corpus.n_books=4", "data.corpus.units_per_book=10", "data.corpus.unit_chars_min=250",
    "data.corpus.unit_chars_max=350", "data.corpus.test_books=1",
    "curriculum.stages=[{name: s2k, bucket: S, max_seq_len: 2048, max_steps: 3},"
    "{name: s4k, bucket: M, max_seq_len: 4096, max_steps: 3}]",
    "data.bucket_budgets.M=4096", "eval.buckets=[S,M]", "eval.max_per_bucket=2", "eval.max_new_tokens=8",
    "trainer.loss_chunk_tokens=16",     # several chunks of LM-head logits per sample, recomputed under ZeRO-3
]
# The recipe's whole-source Prompt-E task on the tiny model and a small corpus (the demos'
# sentence-level task: test_annotate.py::test_sentence_level_demos_train_and_score)
TINY = ["+exp=longnovel_whole_source_demo", *SMALL]


def _ok(proc):
    """A finished run, whose ranks freed every process group before exiting (train.distributed.teardown)."""
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    assert "still referenced after teardown" not in proc.stderr, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("run_a")
    _ok(torchrun(2, TINY + [f"output_dir={out}", "logger.wandb=true", "eval.every_stage=true"],
                 env={"WANDB_API_KEY": ""}))
    return out


def test_run_directory_contract(uninterrupted):
    out = uninterrupted
    assert (out / "config.yaml").exists() and (out / "data" / "build_report.txt").exists()
    log = read_train_log(out)
    assert [r["step"] for r in log] == [1, 2, 3, 4, 5, 6]
    assert [r["stage"] for r in log] == ["s2k"] * 3 + ["s4k"] * 3
    assert all(set(LOG_FIELDS) <= set(r) for r in log)
    assert all(r["tokens"] > 0 and r["loss"] > 0 for r in log)
    assert log[0]["lr"] == log[3]["lr"] == 3e-3, "each stage restarts its cosine schedule at optim.lr"
    assert log[1]["lr"] < log[0]["lr"]
    for stage in ("0-s2k", "1-s4k"):
        assert (out / "checkpoints" / stage / "done.json").exists()
        assert (out / "checkpoints" / stage / "hf" / "model.safetensors").exists()
    metrics = json.loads((out / "eval" / "metrics.json").read_text())
    assert set(metrics["by_bucket"]) == {"S", "M"} and metrics["overall"]["n"] == 4
    for m in metrics["by_bucket"].values():
        assert {"acc", "mcc", "hallu_acc", "nonhallu_acc", "n", "parse_failures"} <= set(m)
    assert (out / "eval" / "report.md").read_text().startswith("# LongNovel detection")
    assert list((out / "wandb").glob("offline-run-*")), "W&B falls back to offline mode without a key"
    stage_eval = json.loads((out / "eval" / "stages" / "0-s2k" / "metrics.json").read_text())
    assert stage_eval["overall"]["n"] == 4
    tables = {p.parent.name + "/" + p.name.rsplit("_", 2)[0]
              for p in (out / "wandb").glob("offline-run-*/files/media/table/**/*.table.json")}
    assert {"s2k/buckets", "s2k/type_recall", "eval/buckets", "eval/predictions"} <= tables, tables


def test_check_run_accepts_the_run_and_names_what_breaks_it(uninterrupted, tmp_path, capsys):
    from train.tools.check_run import main as check_run

    assert check_run([str(uninterrupted), "--min-held-out", "4", "--max-parse-failures", "1.0",
                      "--allow-degenerate"]) == 0
    assert check_run([str(uninterrupted), "--min-held-out", "5"]) == 1
    assert "4 held-out records scored, fewer than 5" in capsys.readouterr().out
    broken = tmp_path / "runs" / "b"
    shutil.copytree(uninterrupted, broken, ignore=shutil.ignore_patterns("wandb", "step-*"))
    shutil.rmtree(broken / "checkpoints" / "1-s4k" / "hf")
    (broken / "eval" / "metrics.json").unlink()
    assert check_run(["--latest", str(broken.parent)]) == 1
    out = capsys.readouterr().out
    assert "stage 's4k' has no export" in out and "metrics.json: missing" in out


@pytest.mark.over_budget("an interrupted 2-rank run and its resume, step for step against the uninterrupted one")
def test_resume_reproduces_the_uninterrupted_losses(uninterrupted, tmp_path):
    out = tmp_path / "run_b"
    first = _ok(torchrun(2, TINY + [f"output_dir={out}", "trainer.stop_at_step=4"]))
    assert [r["step"] for r in read_train_log(out)] == [1, 2, 3, 4]
    assert (out / "checkpoints" / "1-s4k" / "step-000001" / "trainer_state.json").exists()
    assert not (out / "eval").exists(), first.stdout[-2000:]
    said = [line.strip() for line in first.stdout.splitlines()]
    assert "stopped after global step 4 (trainer.stop_at_step=4); the run is not finished. Continue it with:" in said
    command = said[said.index(next(x for x in said if x.startswith("stopped after"))) + 1]
    assert command.startswith("torchrun --nproc_per_node=2 ") and command.endswith(f"output_dir={out} resume=auto")
    assert "stop_at_step" not in command and f"{TINY[0]} {TINY[1]} {TINY[2]}" in command
    second = _ok(torchrun(2, TINY + [f"output_dir={out}", "resume=auto"]))
    assert "resuming at stage 1 's4k' step 1 (global step 4)" in second.stdout
    resumed, reference = read_train_log(out), read_train_log(uninterrupted)
    assert [r["step"] for r in resumed] == [1, 2, 3, 4, 5, 6]
    for a, b in zip(resumed, reference):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5), (a, b)
        assert a["lr"] == pytest.approx(b["lr"], rel=1e-9)
    third = _ok(torchrun(2, TINY + [f"output_dir={out}", "resume=auto"]))
    assert f"{out} has finished all 2 stages (global step 6): re-running its final evaluation only" in third.stdout
    assert read_train_log(out) == resumed


def test_hf_export_loads_and_generates(uninterrupted):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = uninterrupted / "checkpoints" / "1-s4k" / "hf"
    model = AutoModelForCausalLM.from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    ids = tok.apply_chat_template([{"role": "user", "content": "你好"}], add_generation_prompt=True,
                                  return_tensors="pt", return_dict=True)
    out = model.generate(**ids, max_new_tokens=5, do_sample=False)
    assert out.shape[1] > ids["input_ids"].shape[1]
    first = AutoModelForCausalLM.from_pretrained(uninterrupted / "checkpoints" / "0-s2k" / "hf")
    assert not torch.equal(first.model.norm.weight, model.model.norm.weight), "stage 2 changed the weights"


def test_data_parallel_equals_gradient_accumulation(tmp_path):
    """2 ranks x 1 micro-batch == 1 rank x 2 accumulation steps on the same global batch."""
    one_stage = ["curriculum.stages=[{name: s2k, bucket: S, max_seq_len: 2048, max_steps: 2}]",
                 "eval.enabled=false"]
    _ok(torchrun(2, TINY + one_stage + [f"output_dir={tmp_path / 'dp'}"]))
    _ok(torchrun(1, TINY + one_stage + [f"output_dir={tmp_path / 'ga'}", "optim.grad_accum=2"]))
    dp, ga = read_train_log(tmp_path / "dp"), read_train_log(tmp_path / "ga")
    for a, b in zip(dp, ga):
        assert a["tokens"] == b["tokens"]
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-4)
    from safetensors.torch import load_file

    wa = load_file(tmp_path / "dp" / "checkpoints" / "0-s2k" / "hf" / "model.safetensors")
    wb = load_file(tmp_path / "ga" / "checkpoints" / "0-s2k" / "hf" / "model.safetensors")
    for name in wa:
        torch.testing.assert_close(wa[name], wb[name], rtol=1e-4, atol=1e-6)


def test_missing_model_path_fails_at_once_naming_the_key():
    proc = subprocess.run([sys.executable, str(REPO / "train" / "sft.py"), "+exp=longnovel_curriculum"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "model.name_or_path" in proc.stderr and "+exp=longnovel_curriculum_demo" in proc.stderr


def test_a_stage_may_change_the_sequence_parallel_degree(tmp_path):
    """Stage 0 runs data-parallel over both ranks (2 samples a step), stage 1 splits each sample
    across them with ring attention (1 sample a step), in one launch. On an empty sample cache,
    rank 0 tokenises each stage's samples in 2 processes and stores them once."""
    from models.builders import resolve_model_path

    cache, out = tmp_path / "cache", tmp_path / "run"
    model = Path(resolve_model_path("embedded:qwen3-tiny"))
    shutil.copytree(model, cache / "embedded" / model.name)      # the model, not the samples
    stages = ["curriculum.stages=[{name: s2k, bucket: S, max_seq_len: 2048, max_steps: 3, sp_size: 1},"
              "{name: s4k, bucket: M, max_seq_len: 4096, max_steps: 2, sp_size: 2}]", "eval.enabled=false",
              "data.num_proc=2"]
    proc = _ok(torchrun(2, TINY + stages + [f"output_dir={out}"], env={"HALLU_CACHE": str(cache)}))
    assert len([d for d in (cache / "samples").iterdir() if not d.name.startswith(".")]) == 2   # one per stage
    assert "sequence-parallel 1 x data-parallel 2" in proc.stdout
    assert "sequence-parallel 2 x data-parallel 1" in proc.stdout
    log = read_train_log(out)
    assert [r["stage"] for r in log] == ["s2k"] * 3 + ["s4k"] * 2 and all(r["loss"] > 0 for r in log)
    samples = [json.loads(x) for x in (out / "data" / "train.jsonl").read_text().splitlines()]
    longest_m = max(r["n_tokens"] for r in samples if r["length_bucket"] == "M")
    assert all(r["tokens"] <= longest_m for r in log[3:]), "an SP step holds one sample, split across the ranks"
    assert any(r["tokens"] > max(r["n_tokens"] for r in samples if r["length_bucket"] == "S") for r in log[:3])
    assert (out / "checkpoints" / "1-s4k" / "hf" / "model.safetensors").exists()


@pytest.mark.parametrize("zero", ["zero2", "none"])
def test_other_zero_stages_train_and_export(tmp_path, zero):
    one_stage = ["curriculum.stages=[{name: s2k, bucket: S, max_seq_len: 2048, max_steps: 2}]",
                 "eval.enabled=false", f"deepspeed={zero}"]
    _ok(torchrun(2, TINY + one_stage + [f"output_dir={tmp_path}"]))
    log = read_train_log(tmp_path)
    assert [r["step"] for r in log] == [1, 2] and log[1]["loss"] < log[0]["loss"] * 1.5
    assert (tmp_path / "checkpoints" / "0-s2k" / "hf" / "model.safetensors").exists()


@pytest.mark.parametrize("exp", ["anah_generative_demo", "anah_discriminative_demo"])
def test_anah_demos_train_and_score(tmp_path, exp):
    """anah_generative_demo (and anah_discriminative_demo, which CI also runs verbatim) at small sizes."""
    small = [f"+exp={exp}", "trainer.progress=false", "logger.wandb=false", "data.corpus.n_books=3",
             "data.corpus.units_per_book=3", "data.corpus.unit_chars_min=300", "data.corpus.unit_chars_max=400",
             "curriculum.stages=[{name: sft, bucket: all, max_seq_len: 2048, max_steps: 3}]",
             "eval.max_per_bucket=6", "eval.max_new_tokens=16", f"output_dir={tmp_path}"]
    _ok(torchrun(2, small))
    assert len(read_train_log(tmp_path)) == 3
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert metrics["n"] == 6 and set(metrics["by_language"]) == {"zh"}
    assert {"acc", "f1_weighted", "rougeL", "pre4", "parse_failures"} <= set(metrics)
    if exp == "anah_discriminative_demo":
        assert metrics["parse_failures"] == 0          # a head always answers with one of the 4 types


def test_eval_run_scores_a_checkpoint_and_resumes(uninterrupted, tmp_path):
    """eval/run.py on the exported model: predictions, scores, and a resumed run that only
    predicts what is missing. Prompt-B is used (the summary before the article)."""
    def run():
        args = [a for a in TINY if not a.startswith(("eval.", "curriculum."))]
        cmd = [sys.executable, str(REPO / "eval" / "run.py"), *args, "task.template=prompt_b",
               "curriculum.stages=[{name: s, bucket: S, max_seq_len: 2048, max_steps: 1}]",
               f"checkpoint={uninterrupted / 'checkpoints' / '1-s4k' / 'hf'}", f"output_dir={tmp_path}",
               "eval.buckets=[S]", "eval.max_per_bucket=4", "eval.max_new_tokens=6"]
        return _ok(subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300))

    first = run()
    assert "4 records, 0 predicted already, 4 to go" in first.stdout
    preds = (tmp_path / "predictions.jsonl").read_text().splitlines()
    metrics = json.loads((tmp_path / "scores" / "metrics.json").read_text())
    assert len(preds) == 4 and metrics["overall"]["n"] == 4
    (tmp_path / "predictions.jsonl").write_text("\n".join(preds[:3]) + "\n")      # as if interrupted
    second = run()
    assert "4 records, 3 predicted already, 1 to go" in second.stdout
    assert (tmp_path / "predictions.jsonl").read_text().splitlines() == preds        # greedy: same output
    assert json.loads((tmp_path / "scores" / "metrics.json").read_text()) == metrics


def test_compare_two_runs_offline(uninterrupted, tmp_path):
    other = tmp_path / "run_lr"
    _ok(torchrun(2, TINY + [f"output_dir={other}", "optim.lr=1e-4"]))
    out = tmp_path / "cmp"
    proc = subprocess.run([sys.executable, str(REPO / "eval" / "compare.py"), str(uninterrupted), str(other),
                           "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    table = (out / "comparison.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| longnovel_whole_source_demo@")]
    assert len(rows) == 2 * 3                                  # 2 runs x (S, M, overall)
    assert "| `optim.lr` |" in table and "output_dir" not in table
    assert (out / "loss.png").stat().st_size > 1000 and (out / "buckets.png").stat().st_size > 1000


def test_packed_training_with_sequence_parallelism(tmp_path):
    out = tmp_path / "packed"
    proc = _ok(torchrun(2, TINY + [f"output_dir={out}", "data.packing=true", "parallel=sp2",
                                   "parallel.sp_mode=zigzag_varlen", "eval.enabled=false",
                                   "curriculum.stages=[{name: s, bucket: S, max_seq_len: 8192, max_steps: 3}]"]))
    assert "packed rows" in proc.stdout
    log = read_train_log(out)
    assert len(log) == 3 and all(r["loss"] > 0 for r in log)
    assert all(r["tokens"] > 2048 for r in log)     # S samples have at most 2,048 tokens: rows hold several
