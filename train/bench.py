"""One benchmark command for the embedded tiny model on this machine's CPU.

    python -m train.bench [--out bench.json] [--quick]

Prints a table and writes JSON with: training throughput of our trainer against a plain
PyTorch loop (same model, data, batch 1, fp32) at 2k and 16k; the padded fraction of S-bucket
batches with packing off and on; sequence parallelism at 16k / 32k (train.bench_sp); ZeRO-3
step time with and without CPU offload; LongNovel samples built per second; records scored
per second; discriminative inference samples/s and greedy decode tokens/s.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
CORES = os.cpu_count() or 1
DEMO = ["+exp=longnovel_curriculum_demo", "parallel=none", "eval.enabled=false", "trainer.progress=false",
        "logger.wandb=false"]


def _train(overrides: list[str], out: Path) -> list[dict]:
    """Our trainer, one process under torchrun, every core; the rows of its train_log."""
    from train.bench_sp import free_port

    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=1", "--master_addr=127.0.0.1",
           f"--master_port={free_port()}", str(REPO / "train" / "sft.py"), *DEMO, *overrides, f"output_dir={out}"]
    env = {**os.environ, "OMP_NUM_THREADS": str(CORES), "WANDB_SILENT": "true"}
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"training run failed:\n{done.stderr[-3000:]}")
    return [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]


def _median_after_warmup(rows: list[dict], key: str, stage: str) -> float:
    values = [r[key] for r in rows if r["stage"] == stage][1:]
    return statistics.median(values)


def _stages(steps: int, long_steps: int) -> str:
    return ("curriculum.stages=[{name: s2k, bucket: S, max_seq_len: 2048, max_steps: " + str(steps) + "},"
            "{name: s16k, bucket: M, max_seq_len: 16384, max_steps: " + str(long_steps) + "}]")


def plain_loop_tokens_per_s(data_dir: Path, bucket: str, steps: int) -> float:
    """The baseline: HF forward with labels (loss over every position), backward, AdamW step."""
    from data_builders.collate import collate, encode_sample
    from data_builders.schema import read_records
    from models.builders import load_causal_lm, load_tokenizer, resolve_model_path

    torch.set_num_threads(CORES)
    path = resolve_model_path("embedded:qwen3-tiny")
    tok, model = load_tokenizer(path), load_causal_lm(path, "float32", "sdpa")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    records = [r for r in read_records(data_dir / "train.jsonl") if r["length_bucket"] == bucket][:steps]
    times, tokens = [], []
    for rec in records:
        batch = collate([encode_sample(rec, tok)], tok.pad_token_id)
        labels = torch.cat([torch.full((1, 1), -100), batch["shift_labels"][:, :-1]], 1)   # HF shifts itself
        t0 = time.perf_counter()
        model(input_ids=batch["input_ids"], position_ids=batch["position_ids"], labels=labels).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
        tokens.append(batch["input_ids"].numel())
    return statistics.median(n / t for n, t in zip(tokens[1:], times[1:]))


def throughput(work: Path, steps: int, long_steps: int) -> dict:
    rows = _train(["deepspeed=none", _stages(steps, long_steps)], work / "ours")
    out = {}
    for stage, bucket, n in (("s2k", "S", steps), ("s16k", "M", long_steps)):
        ours = _median_after_warmup(rows, "tokens_per_s", stage)
        plain = plain_loop_tokens_per_s(work / "ours" / "data", bucket, n)
        out[stage] = {"ours_tokens_per_s": ours, "plain_tokens_per_s": plain, "ratio": ours / plain}
    return out


def zero_offload(work: Path, steps: int) -> dict:
    out = {}
    for name in ("zero3", "zero3_offload"):
        rows = _train([f"deepspeed={name}", _stages(steps, 1)], work / name)
        out[name] = {"step_s": _median_after_warmup(rows, "step_s", "s2k")}
    out["offload_vs_no_offload"] = out["zero3_offload"]["step_s"] / out["zero3"]["step_s"]
    return out


def padding(data_dir: Path, micro_batch: int = 4, capacity: int = 8192) -> dict:
    """S-bucket samples in plan order: right-padded micro-batches vs packed rows."""
    from data_builders.collate import encode_sample, pack_samples, padded_fraction
    from data_builders.schema import read_records
    from models.builders import load_tokenizer, resolve_model_path

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


def data_and_scoring(n_scored: int = 10_000) -> dict:
    from data_builders.longnovel import build_longnovel
    from data_builders.novel_corpus import generate_corpus
    from eval.scoring import score_files
    from models.builders import load_tokenizer, resolve_model_path

    tok = load_tokenizer(resolve_model_path("embedded:qwen3-tiny"))
    t0 = time.perf_counter()
    units = generate_corpus(8, 48, (1000, 1400), 0)
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
    from data_builders.collate import prompt_ids
    from data_builders.schema import read_records
    from eval.generate import greedy_batch, head_probs_batch
    from models.annotator import load_annotator
    from models.builders import load_tokenizer, resolve_model_path

    torch.set_num_threads(CORES)
    path = resolve_model_path("embedded:qwen3-tiny")
    tok = load_tokenizer(path)
    records = [r for r in read_records(data_dir / "train.jsonl") if r["length_bucket"] == "S"][:n]
    prompts = [prompt_ids(r, tok, "prompt_e") for r in records]
    head = load_annotator(path, "discriminative", "binary")
    t0 = time.perf_counter()
    for k in range(0, len(prompts), 8):
        head_probs_batch(head, prompts[k:k + 8])
    head_rate = len(prompts) / (time.perf_counter() - t0)
    lm = load_annotator(path, "generative")
    out = {"head_samples_per_s": head_rate}
    for batch in (1, 8):
        chunk = prompts[:8]
        t0 = time.perf_counter()
        texts = [t for k in range(0, len(chunk), batch) for t in greedy_batch(lm, tok, chunk[k:k + batch], new_tokens)]
        made = sum(len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts)
        out[f"decode_tokens_per_s_batch{batch}"] = made / (time.perf_counter() - t0)
    return out


TARGETS = {
    "throughput ratio (ours / plain) at 2k and 16k": ">= 1.0",
    "padded fraction with packing": "<= 0.02",
    "sp2 / sp1 activation memory per rank at 32k": "<= 0.6",
    "building the sample dataset": "< 30 s",
    "scoring 10,000 records": "< 5 s",
}


def table(r: dict) -> str:
    t, p, z, d, i = r["throughput"], r["padding"], r["zero_offload"], r["data"], r["inference"]
    lines = ["| measure | value | target |", "|---|---|---|"]
    for stage, label in (("s2k", "2k"), ("s16k", "16k")):
        s = t[stage]
        lines.append(f"| training tokens/s at {label}: ours / plain loop | {s['ours_tokens_per_s']:,.0f} / "
                     f"{s['plain_tokens_per_s']:,.0f} (x{s['ratio']:.2f}) | >= 1.0 |")
    lines.append(f"| padded fraction, S bucket ({p['min_tokens']}-{p['max_tokens']} tokens), micro-batch "
                 f"{p['micro_batch']}: packing off / on | {100 * p['padded_fraction_off']:.1f}% / "
                 f"{100 * p['padded_fraction_on']:.1f}% (rows of {p['row_capacity']} filled "
                 f"{100 * p['row_fill']:.0f}%) | <= 2% on |")
    for row in r.get("sequence_parallel", {}).get("rows", []):
        lines.append(f"| sp2 vs sp1 at {row['length'] // 1024}k: step time / activation memory per rank | "
                     f"x{row['step_ratio_sp2_vs_sp1']:.2f} / x{row['memory_ratio_sp2_vs_sp1']:.2f} | "
                     f"memory <= 0.6 at 32k |")
    lines.append(f"| ZeRO-3 step at 2k: offload / no offload | {z['zero3_offload']['step_s']:.2f} s / "
                 f"{z['zero3']['step_s']:.2f} s (x{z['offload_vs_no_offload']:.2f}) | - |")
    lines.append(f"| LongNovel sample build (S/M/L, {d['longnovel_samples']} samples) | {d['build_s']:.1f} s "
                 f"({d['samples_per_s']:.1f} samples/s) | < 30 s |")
    lines.append(f"| scoring {d['scored_records']:,} records | {d['score_s']:.2f} s ({d['records_per_s']:,.0f}/s) "
                 f"| < 5 s |")
    lines.append(f"| discriminative head inference | {i['head_samples_per_s']:.1f} samples/s | - |")
    lines.append(f"| greedy decode, batch 1 / batch 8 | {i['decode_tokens_per_s_batch1']:.0f} / "
                 f"{i['decode_tokens_per_s_batch8']:.0f} tokens/s | - |")
    return "\n".join(lines)


def run(quick: bool) -> dict:
    from train.bench_sp import bench as bench_sp

    steps, long_steps = (6, 3) if quick else (20, 6)
    result = {"machine": {"cpus": CORES, "torch": torch.__version__, "platform": sys.platform},
              "model": "embedded:qwen3-tiny", "targets": TARGETS}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        sections = [("throughput", lambda: throughput(work, steps, long_steps)),
                    ("padding", lambda: padding(work / "ours" / "data")),
                    ("inference", lambda: inference(work / "ours" / "data")),
                    ("zero_offload", lambda: zero_offload(work, steps)),
                    ("data", data_and_scoring)]
        if not quick:
            sections.append(("sequence_parallel", lambda: bench_sp([16384, 32768], repeat=1)))
        for name, fn in sections:
            t0 = time.perf_counter()
            result[name] = fn()
            print(f"[bench] {name}: {time.perf_counter() - t0:.0f} s", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="bench.json")
    parser.add_argument("--quick", action="store_true", help="fewer steps, no sequence-parallel section")
    args = parser.parse_args()
    result = run(args.quick)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(table(result))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
