"""One benchmark command for the embedded tiny model on this machine's CPU.

    python -m train.tools.bench [--out bench.json] [--quick]
    python -m train.tools.bench --model embedded:smollm2-135m [--steps 4]    # throughput only, 512 and 2k
    python -m train.tools.bench --only product,data                          # only these sections

Prints a table and writes JSON with: training throughput of our trainer against a plain
PyTorch loop (same model, data, batch 1, fp32) at 2k and 16k; the padded fraction of S-bucket
batches with packing off and on; sequence parallelism at 16k / 32k (train.tools.bench_sp); ZeRO-3
step time with and without CPU offload; peak memory of the generative loss at 32k with a
151,936-token vocabulary, all logits at once against chunks (train.tools.bench_loss); LongNovel
samples built per second; records scored per second; discriminative inference samples/s,
greedy decode tokens/s, `eval.annotate` rows/s, and `eval.annotate` rows/s of the annotators a user
runs on RAGTruth-sized rows (MiniLM span head, SmolLM2-135M sentence by sentence).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir

import configs.schema  # noqa: F401  (registers the schemas)
from configs.schema import typed
from data_builders.common.progress import quiet_libraries
from data_builders.model_inputs.collate import encode_sample, pack_samples, padded_fraction, prompt_ids
from data_builders.records import read_records, write_jsonl
from data_builders.sources import DataRequest, build_records
from data_builders.synthetic.length_extension import build_longnovel
from data_builders.synthetic.novel_corpus import generate_corpus
from eval.annotate import Annotator
from eval.scorers.scoring import score_files
from models.annotator import load_annotator
from models.builders import dtype_choice, load_causal_lm, load_tokenizer, resolve_model_path, torch_dtype
from models.export_spec import AnnotatorSpec
from models.generate import greedy_batch, head_probs_batch
from models.kinds import kind_of
from train.data import plan_stage, stage_samples
from train.distributed import free_port, init_distributed, teardown
from train.engine import build_engine, release_engine
from train.loop import StageContext, train_step
from train.run_dir import read_train_log
from train.tools.bench_loss import measure as bench_loss
from train.tools.bench_loss import row as loss_row
from train.tools.bench_sp import bench as bench_sp

REPO = Path(__file__).resolve().parents[2]
CORES = os.cpu_count() or 1
DEMO = ["+exp=longnovel_whole_source_demo", "parallel=none", "eval.enabled=false", "trainer.progress=false",
        "logger.wandb=false"]


def _train(overrides: list[str], out: Path) -> list[dict]:
    """Our trainer, one process under torchrun, every core; the rows of its train_log."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=1", "--master_addr=127.0.0.1",
           f"--master_port={free_port()}", str(REPO / "train" / "sft.py"), *DEMO, *overrides, f"output_dir={out}"]
    env = {**os.environ, "OMP_NUM_THREADS": str(CORES), "WANDB_SILENT": "true"}
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"training run failed:\n{done.stderr[-3000:]}")
    return read_train_log(out)


def _median_after_warmup(rows: list[dict], key: str, stage: str) -> float:
    values = [r[key] for r in rows if r["stage"] == stage][1:]
    return statistics.median(values)


TINY_LENGTHS = (2048, 16384)        # the tiny model's throughput stages (whole sources); a real model's: REAL_STAGES
# A real model's stages judge summary sentences, as SmolLM2 is trained (the trainer never truncates, and a
# whole S-bucket source is 4.5k-5.5k SmolLM2 tokens): {max_seq_len: evidence sentences}, samples of
# 190-420 and 1.7k-2.0k SmolLM2 tokens
REAL_STAGES = {512: 3, 2048: 44}
SENTENCE_TASK = "task=longnovel_evidence_generative"


def _stage_name(length: int) -> str:
    return f"s{length // 1024}k" if length >= 1024 else f"s{length}"


def _step_counts(steps: int, long_steps: int, lengths: tuple[int, ...]) -> tuple[int, ...]:
    return (steps, *[long_steps] * (len(lengths) - 1))


def _stages(steps: int, long_steps: int, lengths: tuple[int, ...] = TINY_LENGTHS) -> str:
    return ("curriculum.stages=[" + ",".join(
        f"{{name: {_stage_name(n)}, bucket: {'S' if n <= 8192 else 'M'}, max_seq_len: {n}, max_steps: {k}}}"
        for n, k in zip(lengths, _step_counts(steps, long_steps, lengths))) + "]")


def _compose(overrides: list[str]):
    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base="1.3"):
        return typed(compose("sft", overrides=DEMO + overrides))


class PlainLoop:
    """The baseline: HF forward with labels (loss over every position), backward, AdamW step."""

    def __init__(self, path: str, lr: float):
        self.model = load_causal_lm(path, "float32", "sdpa")
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=lr)

    def step(self, sample: dict) -> int:
        ids = torch.tensor([sample["input_ids"]])
        labels = torch.tensor([[-100] + sample["shift_labels"][:-1]])          # HF shifts labels itself
        self.model(input_ids=ids, labels=labels).loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return ids.numel()


def throughput(work: Path, steps: int, long_steps: int, model: str | None = None,
               lengths: tuple[int, ...] = TINY_LENGTHS, evidence: dict[int, int] | None = None) -> dict:
    """Our trainer's step (DeepSpeed engine without ZeRO, response-only loss, the loop's own
    train_step) and the plain loop, alternating step by step on the same samples, so that
    machine noise hits both alike. Single process, every core, fp32, batch 1; `model` replaces
    the embedded tiny model (the demo corpus is tokenised with its tokenizer); `evidence`
    ({max_seq_len: count}) replaces `lengths` with stages of summary sentences and that many evidence
    sentences."""
    torch.set_num_threads(CORES)
    lengths = tuple(evidence) if evidence else lengths
    base = ["deepspeed=none", _stages(steps, long_steps, lengths), *([f"model.name_or_path={model}"] if model else [])]

    def config_at(length: int):
        return _compose(base + ([SENTENCE_TASK, f"task.evidence_sentences={evidence[length]}"] if evidence else []))

    cfg = config_at(lengths[0])
    path = resolve_model_path(cfg.model.name_or_path)
    tok = load_tokenizer(path)
    request = DataRequest.of_run(cfg.task, cfg.curriculum, cfg.eval, cfg.trainer.seed)
    records = build_records(cfg.data, request, tok)[0]["train"]
    info = init_distributed(1)
    try:
        return {stage.name: _stage_throughput(config_at(length), path, tok, records, stage, n, info, work)
                for stage, n, length in zip(cfg.curriculum.stages, _step_counts(steps, long_steps, lengths), lengths)}
    finally:
        del info           # teardown() frees only groups nothing else holds
        teardown()


def _stage_throughput(cfg, path: str, tok, records: list[dict], stage, n: int, info, work: Path) -> dict:
    """One stage of `throughput`; its engine is released and every reference to it gone on return."""
    samples, _ = stage_samples(records, stage, tok, cfg.task, 1.0)
    plan = plan_stage(stage, len(samples), 1, 1, 1, cfg.trainer.seed, n)
    engine = build_engine(cfg, path, 1, cfg.optim.lr, plan.total_steps)
    ctx = StageContext.of_stage(cfg.trainer, cfg.task, 0, stage, work, info, tok.pad_token_id,
                                sp_mode=cfg.parallel.sp_mode, zero_stage=cfg.deepspeed.zero_stage,
                                packed=cfg.data.packing)
    plain = PlainLoop(path, cfg.optim.lr)
    ours_rate, plain_rate, step_tokens = [], [], []
    for k in range(plan.total_steps):
        t0 = time.perf_counter()
        tokens = train_step(engine, samples, plan, k, ctx)["tokens"]
        ours_rate.append(tokens / (time.perf_counter() - t0))
        step_tokens.append(tokens)
        t0 = time.perf_counter()
        tokens = plain.step(samples[plan.rank_indices(k, 0)[0][0]])
        plain_rate.append(tokens / (time.perf_counter() - t0))
    release_engine(engine)
    ours, base = statistics.median(ours_rate[1:]), statistics.median(plain_rate[1:])
    return {"ours_tokens_per_s": ours, "plain_tokens_per_s": base, "ratio": ours / base, "steps": plan.total_steps,
            "median_tokens": statistics.median(step_tokens)}


def _data_dir(work: Path, books: int | None = None) -> Path:
    """Records of the demo corpus (S and M buckets; `books` of them, else the demo's), built once for the sections
    that need them."""
    out = work / "data"
    if not (out / "train.jsonl").exists():
        cfg = _compose([_stages(1, 1), *([f"data.corpus.n_books={books}"] if books else [])])
        tokenizer = load_tokenizer(resolve_model_path(cfg.model.name_or_path))
        request = DataRequest.of_run(cfg.task, cfg.curriculum, cfg.eval, cfg.trainer.seed)
        write_jsonl(out / "train.jsonl", build_records(cfg.data, request, tokenizer)[0]["train"])
    return out


def zero_offload(work: Path, steps: int) -> dict:
    out = {}
    for name in ("zero3", "zero3_offload"):
        rows = _train([f"deepspeed={name}", _stages(steps, 1, (2048,))], work / name)
        out[name] = {"step_s": _median_after_warmup(rows, "step_s", "s2k")}
    out["offload_vs_no_offload"] = out["zero3_offload"]["step_s"] / out["zero3"]["step_s"]
    return out


def padding(data_dir: Path, micro_batch: int = 4, capacity: int = 8192) -> dict:
    """S-bucket samples in plan order: right-padded micro-batches vs packed rows."""
    tok = load_tokenizer(resolve_model_path("embedded:qwen3-tiny"))
    samples = [encode_sample(r, tok) for r in read_records(data_dir / "train.jsonl") if r["length_bucket"] == "S"]
    order = torch.randperm(len(samples), generator=torch.Generator().manual_seed(0)).tolist()
    batches = [[samples[i] for i in order[k:k + micro_batch]] for k in range(0, len(order), micro_batch)]
    rows = pack_samples(samples, capacity)
    lengths = [len(s["input_ids"]) for s in samples]
    return {"samples": len(samples), "min_tokens": min(lengths), "max_tokens": max(lengths),
            "padded_fraction_off": padded_fraction(batches), "micro_batch": micro_batch,
            "padded_fraction_on": padded_fraction([[r] for r in rows]), "packed_rows": len(rows),
            "row_capacity": capacity, "row_fill": sum(lengths) / (len(rows) * capacity)}


def data_and_scoring(n_scored: int = 10_000, books: int = 8) -> dict:
    tok = load_tokenizer(resolve_model_path("embedded:qwen3-tiny"))
    t0 = time.perf_counter()
    units = generate_corpus(books, 48, (1000, 1400), 0)
    built = build_longnovel(units, tok, {"S": 2048, "M": 16384, "L": 32768}, test_books=2)
    build_s = time.perf_counter() - t0
    n_built = sum(map(len, built.values()))
    gold = [dict(r, id=f"{r['id']}-{k}") for k in range(n_scored // n_built + 1) for s in built.values()
            for r in s][:n_scored]
    preds = [{"id": r["id"], "output": '{"has_hallucination": "有幻觉", "details": []}'} for r in gold]
    with tempfile.TemporaryDirectory() as tmp:
        for name, rows in (("g.jsonl", gold), ("p.jsonl", preds)):
            Path(tmp, name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        t0 = time.perf_counter()
        score_files("longnovel", f"{tmp}/g.jsonl", f"{tmp}/p.jsonl", f"{tmp}/out", plots=False)
        score_s = time.perf_counter() - t0
    return {"longnovel_samples": n_built, "build_s": build_s, "samples_per_s": n_built / build_s,
            "scored_records": len(gold), "score_s": score_s, "records_per_s": len(gold) / score_s}


def inference(data_dir: Path, n: int = 48, new_tokens: int = 64) -> dict:
    torch.set_num_threads(CORES)
    path = resolve_model_path("embedded:qwen3-tiny")
    tok = load_tokenizer(path)
    records = [r for r in read_records(data_dir / "train.jsonl") if r["length_bucket"] == "S"][:n]
    prompts = [prompt_ids(r, tok, "prompt_e") for r in records]
    head = load_annotator(path, "discriminative", "binary")
    t0 = time.perf_counter()
    for k in range(0, len(prompts), 8):
        head_probs_batch(head, [{"input_ids": p} for p in prompts[k:k + 8]])
    head_rate = len(prompts) / (time.perf_counter() - t0)
    lm = load_annotator(path, "generative")
    out = {"head_samples_per_s": head_rate}
    shortest = min(map(len, prompts[:8]))
    chunk = [p[-shortest:] for p in prompts[:8]]      # greedy_batch decodes prompts of one length together
    for batch in (1, 8):
        t0 = time.perf_counter()
        texts = [t for k in range(0, len(chunk), batch) for t in greedy_batch(lm, tok, chunk[k:k + batch], new_tokens)]
        made = sum(len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts)
        out[f"decode_tokens_per_s_batch{batch}"] = made / (time.perf_counter() - t0)
    return out


def annotation(data_dir: Path, work: Path, n: int = 8, new_tokens: int = 64) -> dict:
    """`eval.annotate`'s rows/s on S-bucket (2k) records, sentence by sentence as the demos judge
    them: the embedded tiny model exported as a generative annotator (answers cut at `new_tokens`)
    and as a binary head (its head untrained: speed does not depend on the weights)."""
    torch.set_num_threads(CORES)
    rows = [{"id": r["id"], "source": r["source"], "response": r["response"]}
            for r in read_records(data_dir / "train.jsonl") if r["length_bucket"] == "S"][:n]
    out = {"rows": len(rows), "new_tokens": new_tokens,
           "sentences_per_row": statistics.mean(r["response"].count("。") for r in rows)}
    for kind, head, labels in (("generative", "binary", ["faithful", "hallucinated"]),
                               ("discriminative", "binary", ["faithful", "hallucinated"])):
        export = work / f"annotator_{kind}"
        if not export.exists():
            shutil.copytree(resolve_model_path("embedded:qwen3-tiny"), export)
        AnnotatorSpec(kind, head, "sentence_check", 3, "longnovel", "zh", 2048, new_tokens, labels,
                      threshold=None if kind_of(kind).generates else 0.5).save(export)
        annotator = Annotator.load(export)
        t0 = time.perf_counter()
        annotator.annotate_rows(rows)
        out[f"{kind}_rows_per_s"] = len(rows) / (time.perf_counter() - t0)
    return out


RAGTRUTH_SOURCE_CHARS, RAGTRUTH_RESPONSE_CHARS = 2000, 760      # RAGTruth's medians (2,617 responses)
ONE_WINDOW_SOURCE_CHARS = 1300     # with a median response: one MiniLM pair of 484-509 tokens (its window: 512)


def ragtruth_sized_rows(n: int, source_chars: int = RAGTRUTH_SOURCE_CHARS) -> list[dict]:
    """English rows as long as RAGTruth's median source (or `source_chars`) and response, each its own text."""
    def sentences(i: int, chars: int, salt: int) -> str:
        out, k = [], 0
        while sum(map(len, out)) < chars:
            j = i * 31 + k * 7 + salt
            out.append(f"The {('north', 'old', 'new', 'river')[j % 4]} library of town {j % 97} lent "
                       f"{100 + j % 900} books to {10 + j % 50} schools on day {1 + j % 28} of the season. ")
            k += 1
        return "".join(out)[:chars].rstrip() + "."
    return [{"id": f"p{i}", "source": sentences(i, source_chars, 0),
             "response": sentences(i, RAGTRUTH_RESPONSE_CHARS, 3)} for i in range(n)]


def product(work: Path, n_minilm: int = 64, n_smollm2: int = 8) -> dict:
    """`eval.annotate`'s rows/s for the annotators a user runs: MiniLM as a span head (LettuceDetect's
    formulation; pairs in its 512-token window, a longer evidence in chunks) on RAGTruth-sized rows (2
    chunks) and on rows that fill one window, each in fp32 and in `dtype=bf16_if_native` (one run where that
    is fp32: no native bf16); SmolLM2-135M sentence by sentence against 6 evidence sentences on
    RAGTruth-sized rows. The heads are untrained: speed does not depend on the weights."""
    torch.set_num_threads(CORES)
    labels = ["faithful", "hallucinated"]
    minilm = AnnotatorSpec("spans", "binary", "prompt_e", 0, "spans", "en", 512, 0, labels, threshold=0.5)
    smollm2 = AnnotatorSpec("discriminative", "binary", "sentence_check", 6, "spans", "en", 2048, 0, labels,
                            threshold=0.5)
    out = {"source_chars": RAGTRUTH_SOURCE_CHARS, "response_chars": RAGTRUTH_RESPONSE_CHARS,
           "one_window_source_chars": ONE_WINDOW_SOURCE_CHARS, "bf16_if_native": dtype_choice("bf16_if_native")}
    same_dtype = out["bf16_if_native_is_fp32"] = torch_dtype("bf16_if_native") == torch_dtype("auto")
    for name, source_chars in (("minilm_spans", RAGTRUTH_SOURCE_CHARS), ("minilm_spans_512", ONE_WINDOW_SOURCE_CHARS)):
        rows = ragtruth_sized_rows(n_minilm, source_chars)
        fp32 = out[f"{name}_rows_per_s"] = _rows_per_s(work / "product_minilm", "embedded:minilm", minilm, rows, "auto")
        out[f"{name}_bf16_if_native_rows_per_s"] = fp32 if same_dtype else _rows_per_s(
            work / "product_minilm", "embedded:minilm", minilm, rows, "bf16_if_native")
    out["smollm2_sentences_rows_per_s"] = _rows_per_s(work / "product_smollm2", "embedded:smollm2-135m", smollm2,
                                                      ragtruth_sized_rows(n_smollm2), "auto")
    return out


def _rows_per_s(export: Path, base: str, spec, rows: list[dict], dtype: str) -> float:
    """`Annotator.annotate_rows` rows/s of `base` exported with `spec`, after a warm-up."""
    if not export.exists():
        shutil.copytree(resolve_model_path(base), export)
    spec.save(export)
    annotator = Annotator.load(export, batch_size=16, dtype=dtype)
    annotator.annotate_rows(rows[:2])                      # warm-up
    t0 = time.perf_counter()
    annotator.annotate_rows(rows)
    return len(rows) / (time.perf_counter() - t0)


TARGETS = {
    "throughput ratio (ours / plain) at 2k and 16k": ">= 1.0",
    "padded fraction with packing": "<= 0.02",
    "sp2 / sp1 activation memory per rank at 32k": "<= 0.6",
    "building the sample dataset": "< 30 s",
    "scoring 10,000 records": "< 5 s",
}


def _padding_rows(p: dict) -> list[str]:
    return [f"| padded fraction, S bucket ({p['min_tokens']}-{p['max_tokens']} tokens), micro-batch "
            f"{p['micro_batch']}: packing off / on | {100 * p['padded_fraction_off']:.1f}% / "
            f"{100 * p['padded_fraction_on']:.1f}% (rows of {p['row_capacity']} filled "
            f"{100 * p['row_fill']:.0f}%) | <= 2% on |"]


def _sp_rows(sp: dict) -> list[str]:
    return [f"| sp2 vs sp1 at {row['length'] // 1024}k: step time / peak RSS growth / saved activations, "
            f"per rank | x{row['step_ratio_sp2_vs_sp1']:.2f} / x{row['memory_ratio_sp2_vs_sp1']:.2f} / "
            f"x{row['saved_ratio_sp2_vs_sp1']:.2f} | memory <= 0.6 at 32k |" for row in sp.get("rows", [])]


def _zero_rows(z: dict) -> list[str]:
    return [f"| ZeRO-3 step at 2k: offload / no offload | {z['zero3_offload']['step_s']:.2f} s / "
            f"{z['zero3']['step_s']:.2f} s (x{z['offload_vs_no_offload']:.2f}) | - |"]


def _data_rows(d: dict) -> list[str]:
    return [f"| LongNovel sample build (S/M/L, {d['longnovel_samples']} samples) | {d['build_s']:.1f} s "
            f"({d['samples_per_s']:.1f} samples/s) | < 30 s |",
            f"| scoring {d['scored_records']:,} records | {d['score_s']:.2f} s ({d['records_per_s']:,.0f}/s) | < 5 s |"]


def _inference_rows(i: dict) -> list[str]:
    return [f"| discriminative head inference | {i['head_samples_per_s']:.1f} samples/s | - |",
            f"| greedy decode, batch 1 / batch 8 | {i['decode_tokens_per_s_batch1']:.0f} / "
            f"{i['decode_tokens_per_s_batch8']:.0f} tokens/s | - |"]


def _annotation_rows(a: dict) -> list[str]:
    return [f"| eval.annotate at 2k, sentence by sentence ({a['sentences_per_row']:.0f} sentences a row): "
            f"binary head / generative (answers cut at {a.get('new_tokens', 64)} tokens) | "
            f"{a['discriminative_rows_per_s']:.2f} / "
            f"{a['generative_rows_per_s']:.2f} rows/s | - |"]


def _product_rows(a: dict) -> list[str]:
    lines = []
    for name, what in (("minilm_spans", f"RAGTruth-sized rows ({a['source_chars']:,} / {a['response_chars']} "
                                         "characters, 2 chunks)"),
                       ("minilm_spans_512", f"rows of one 512-token window ({a['one_window_source_chars']:,} / "
                                            f"{a['response_chars']} characters)")):
        both = (f"{a[name + '_rows_per_s']:.1f} rows/s (one run)" if a["bf16_if_native_is_fp32"] else
                f"{a[name + '_rows_per_s']:.1f} / {a[name + '_bf16_if_native_rows_per_s']:.1f} rows/s")
        lines.append(f"| eval.annotate, MiniLM span head, {what}: fp32 / {a['bf16_if_native']} | {both} | "
                     ">= 30 at 512 tokens (LettuceDetect: 30-60 examples/s on an A100) |")
    lines.append(f"| eval.annotate, SmolLM2-135M sentence by sentence, RAGTruth-sized rows | "
                 f"{a['smollm2_sentences_rows_per_s']:.2f} rows/s | - |")
    return lines


def table(r: dict) -> str:
    """The measured sections' rows, in the order the full run prints them."""
    rows = {"throughput": lambda t: throughput_rows(t, r["model"]), "padding": _padding_rows,
            "sequence_parallel": _sp_rows, "loss_memory": lambda m: [loss_row(m)], "zero_offload": _zero_rows,
            "data": _data_rows, "inference": _inference_rows, "annotation": _annotation_rows,
            "product": _product_rows}
    lines = ["| measure | value | target |", "|---|---|---|"]
    for name, section_rows in rows.items():
        if name in r:
            lines += section_rows(r[name])
    return "\n".join(lines)


def throughput_rows(t: dict, model: str) -> list[str]:
    return [f"| training tokens/s at {stage[1:]} ({model}; samples of {s['median_tokens']:,.0f} tokens): ours / plain "
            f"loop | {s['ours_tokens_per_s']:,.0f} / {s['plain_tokens_per_s']:,.0f} (x{s['ratio']:.2f}) | >= 1.0 |"
            for stage, s in t.items()]


def run_model(model: str, steps: int) -> dict:
    """The throughput section alone, for a real model on sentence-level samples at REAL_STAGES (a 16k step of
    a 135M model on 2 CPU cores takes minutes)."""
    with tempfile.TemporaryDirectory() as tmp:
        return {"machine": {"cpus": CORES, "torch": torch.__version__, "platform": sys.platform}, "model": model,
                "throughput": throughput(Path(tmp), steps, steps, model, evidence=REAL_STAGES)}


@dataclass(frozen=True)
class Sizes:
    """How much each section measures. --quick measures every section at its smallest size: it shows that the
    command runs end to end and what it prints, not figures to quote."""
    steps: int = 20                         # training steps at the first length (the first is warm-up)
    long_steps: int = 6                     # ... at the longer ones
    lengths: tuple[int, ...] = TINY_LENGTHS
    books: int | None = None                # the demo corpus's books (None: the demo's own)
    scored: int = 10_000                    # records scored by the data section
    built_books: int = 8                    # books the data section builds
    inferred: int = 48                      # prompts of the inference section
    new_tokens: int = 64                    # tokens decoded by the inference and annotation sections
    annotated: int = 8                      # rows of the annotation section
    product_rows: tuple[int, int] = (64, 8)     # MiniLM rows, SmolLM2 rows


QUICK = Sizes(steps=3, long_steps=2, lengths=TINY_LENGTHS[:1], books=4, scored=2_000, built_books=3, inferred=8,
              new_tokens=16, annotated=2, product_rows=(4, 1))


def sections(work: Path, quick: bool) -> dict:
    """Every section of the full run, by name, in the order it runs them."""
    z = QUICK if quick else Sizes()
    return {"throughput": lambda: throughput(work, z.steps, z.long_steps, lengths=z.lengths),
            "padding": lambda: padding(_data_dir(work, z.books)),
            "inference": lambda: inference(_data_dir(work, z.books), z.inferred, z.new_tokens),
            "annotation": lambda: annotation(_data_dir(work, z.books), work, z.annotated, z.new_tokens),
            "product": lambda: product(work, *z.product_rows),
            "zero_offload": lambda: zero_offload(work, z.steps),
            "data": lambda: data_and_scoring(z.scored, z.built_books),
            "sequence_parallel": lambda: bench_sp([16384, 32768], repeat=1),
            "loss_memory": bench_loss}


FULL_ONLY = ("sequence_parallel", "loss_memory")     # left out of --quick


def run(quick: bool, only: tuple[str, ...] = ()) -> dict:
    result = {"machine": {"cpus": CORES, "torch": torch.__version__, "platform": sys.platform},
              "model": "embedded:qwen3-tiny", "targets": TARGETS}
    with tempfile.TemporaryDirectory() as tmp:
        measure = sections(Path(tmp), quick)
        unknown = sorted(set(only) - set(measure))
        if unknown:
            raise SystemExit(f"--only: unknown section(s) {', '.join(unknown)}; the sections are {', '.join(measure)}")
        for name in only or [s for s in measure if not (quick and s in FULL_ONLY)]:
            t0 = time.perf_counter()
            result[name] = measure[name]()
            print(f"[bench] {name}: {time.perf_counter() - t0:.0f} s", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="bench.json")
    parser.add_argument("--quick", action="store_true",
                        help="every section at its smallest size (see Sizes), no sequence-parallel or loss section")
    parser.add_argument("--model", help="only the throughput section, for this model (embedded:smollm2-135m or a "
                                        "local directory), on summary sentences and their evidence at 512 and 2k")
    parser.add_argument("--only", default="",
                        help=f"comma-separated sections to run, of: {', '.join(sections(Path(), False))}")
    parser.add_argument("--steps", type=int, default=4,
                        help="with --model: steps (the first is warm-up; a SmolLM2 step at 2k takes about 25 s)")
    args = parser.parse_args()
    quiet_libraries(verbose=False)        # no weight-loading bars in a log file
    only = tuple(filter(None, args.only.split(",")))
    result = run_model(args.model, args.steps) if args.model else run(args.quick, only)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print("\n".join(["| measure | value | target |", "|---|---|---|",
                     *throughput_rows(result["throughput"], result["model"])]) if args.model else table(result))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
