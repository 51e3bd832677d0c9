"""The GPU memory plan (train/memory_plan.py; its command, train/tools/plan.py): parameter counts from the real
architecture class on the
meta device, its activation / ring / logits terms against measured CPU peaks of the tiny model,
the CLI, and the trainer's refusal of a run far over its GPU."""
import subprocess
import sys

import pytest

from models.builders import resolve_model_path
from tests.conftest import REPO
from train.memory_plan import GB, Layout, MemoryPlanError, RunPlan, check_before_training, model_shape, stage_terms

CPU_STEP = Layout(world=2, ranks_per_node=2, zero_stage=0, offload_param=False, offload_optimizer=False,
                  gradient_checkpointing=False, generative=True, chunk_tokens=1024)


def test_parameters_are_counted_from_the_architecture_without_weights(qwen3_8b):
    m = model_shape(str(qwen3_8b))
    assert m.params == 8_190_735_360 and m.head_params == m.embed_params == 151936 * 4096
    assert (m.layers, m.kv_width, m.dtype_bytes) == (36, 1024, 2)


@pytest.mark.slow
@pytest.mark.over_budget("real training steps at 2k and 16k tokens, sp 1 and 2: the plan is checked where it is linear")
def test_planned_activations_and_logits_are_within_20_percent_of_measured_cpu_peaks():
    """One training step of the tiny model, fp32 (train.tools.bench_sp's measure): the bytes autograd saves
    at 2k and 16k and sp 1 / 2, and at 16k (at 2k, the allocator reuses heap and RSS
    undercounts) the peak RSS growth of the step, loss logits included. The planned activations are linear in
    the tokens a rank holds, so 16k checks what 32k did at a quarter of its attention compute (212 s -> 120 s)."""
    from train.tools.bench_sp import _measure_step, launch

    m = model_shape(resolve_model_path("embedded:qwen3-tiny"), dtype="float32")
    for length in (2048, 16384):
        for sp in (1, 2):
            measured = max(launch(_measure_step, sp, 2 // sp, length, 0), key=lambda r: r["saved_mb"])
            t = stage_terms(m, CPU_STEP, length, sp, labelled=256)     # the worker labels 256 tokens
            planned = (t["activations"] + t["attention"]) / 2**20
            assert abs(planned / measured["saved_mb"] - 1) < 0.2, (length, sp, planned, measured)
            if length >= 16384:
                peak = planned + t["passing"] / 2**20
                assert abs(peak / measured["activation_mb"] - 1) < 0.2, (length, sp, peak, measured)


def test_planned_checkpointed_step_is_within_15_percent_of_the_growth_an_h100_measured():
    """With gradient checkpointing the loss's logits chunk is freed before backward recomputes a layer: the plan
    holds the larger of the two. Against the growth the GPU check measured on an H100 (docs/gpu/h100.json: a
    Qwen3-0.6B-shaped step at 32k tokens, chunk 1024), the sum of the two was 44% / 60% over."""
    import json

    from train.tools.gpu_check import QWEN3_0_6B, planned_step_bytes

    plan = planned_step_bytes(QWEN3_0_6B, 32768, chunk=1024)
    rows = json.loads((REPO / "docs" / "gpu" / "h100.json").read_text())["training_step"]
    assert {r["attn"] for r in rows} == {"ring", "sdpa"}
    for row in rows:
        assert row["tokens"] == 32768
        planned = (plan["activations"] + plan["passing"]) / 1e9
        assert abs(planned / row["measured_activation_gb"] - 1) < 0.15, (row["attn"], planned, row)


def test_plan_cli_prints_each_stage_and_names_a_bad_gpu(qwen3_8b):
    def plan(*overrides):
        return subprocess.run([sys.executable, "-m", "train.tools.plan", "+exp=longnovel_curriculum",
                               f"model.name_or_path={qwen3_8b}", *overrides], cwd=REPO, capture_output=True,
                              text=True, timeout=120)

    ok = plan("plan.gpu=h20")
    assert ok.returncode == 0, ok.stderr[-2000:]
    memory, disk = ok.stdout.split("host memory for offload")
    stages = ["bridge_2k", "sft_16k", "bridge_16k", "sft_32k"]
    for text in (memory, disk):
        rows = [line for line in text.splitlines() if line.startswith("| ") and "|---" not in line][1:]
        assert [r.split("|")[1].strip() for r in rows] == stages
    assert "GB of 96" in memory
    # Qwen3-8B: 8.19e9 parameters, 12 bytes each under ZeRO-3, bf16 exports; 4 exports + 3 checkpoints
    assert "| sft_32k | 98.3 | 16.4 |" in disk and "peak disk of the run: 360 GB" in disk
    assert "peak disk of the run: 66 GB" in plan("plan.gpu=h20", "trainer.save_every=0").stdout
    bad = plan("plan.gpu=t4")
    assert bad.returncode == 1 and "plan.gpu" in bad.stderr and "Traceback" not in bad.stderr


def test_the_trainer_check_warns_when_over_and_refuses_when_far_over(qwen3_8b):
    from hydra import compose, initialize_config_dir

    import configs.schema  # noqa: F401
    from configs.schema import typed

    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base="1.3"):
        cfg = typed(compose("sft", overrides=["+exp=longnovel_curriculum", f"model.name_or_path={qwen3_8b}"]))
    run = RunPlan.of_run(cfg, 8)
    assert check_before_training(run, 96 * GB) is None
    assert "sft_32k" in check_before_training(run, 24 * GB)           # 32k over by < 25%: a warning
    with pytest.raises(MemoryPlanError, match="plan.max_over"):
        check_before_training(run, 12 * GB)
    assert cfg.plan.gpu_mem_gb is None                                   # the run's config is left alone
