"""GPU memory plan of a run, per curriculum stage, before any GPU is rented (the command:
`python -m train.tools.plan`; the trainer and the SLURM renderer read it too).

Reads only the model's `config.json`: the architecture class is built on the meta device
(`accelerate.init_empty_weights`), which gives the parameter counts; nothing is downloaded or
allocated. Per rank and stage it adds up:

- parameters, gradients, optimizer state under ZeRO-3 with the configured offload (DeepSpeed's
  defaults: a 5e8-element reduce bucket, a 5e7-element prefetch bucket);
- activations at the stage's max_seq_len / sp_size tokens per rank: the tensors a Llama / Qwen3
  decoder layer saves for backward, 11h + 4kv + 4i elements per token (h hidden, kv the key /
  value width, i the MLP width; measured on CPU by `tests/test_plan.py`), every layer's without
  gradient checkpointing, else one hidden state per layer;
- ring attention's key / value blocks in flight (sp_size > 1);
- what lives only part of the step: the generative loss's chunk of LM-head logits
  (`trainer.loss_chunk_tokens`) with its fp32 log-softmax and gradient, and, with gradient
  checkpointing, the one layer recomputed in backward; the loss is done before backward recomputes
  a layer, so the step holds the larger of the two, not both (an H100 measured the sum 44-60% over);
- a fixed reserve for the CUDA context, NCCL and allocator fragmentation;

and the host memory that offload needs per node; then the disk: one checkpoint, one stage export,
and the run's peak under `trainer.keep_checkpoints` (train/disk.py). The trainer runs the same plan at start on
GPUs: it warns when a stage is predicted not to fit, and stops with this table when a stage is
over by more than `plan.max_over`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from configs.choices import Gpu
from configs.schema import (
    CurriculumConfig,
    ModelConfig,
    ParallelConfig,
    PlanConfig,
    SFTConfig,
    SlurmConfig,
    TaskConfig,
    TrainerConfig,
    stage_sp_size,
)
from models.kinds import kind_of
from train.disk import GB, checkpoint_bytes, export_bytes, peak_disk_bytes
from train.parallel_dims import job_world_size, procs_per_node

GPU_MEMORY_GB = {"h20": 96, "a800": 80, "a100-40": 40, "a100-80": 80, "a100": 80, "h100": 80, "h800": 80,
                 "h200": 141}
RUNTIME_RESERVE = 2.0 * GB          # CUDA context, NCCL buffers, allocator fragmentation
REDUCE_BUCKET = 5e8                 # DeepSpeed ZeRO defaults (elements)
PREFETCH_BUCKET = 5e7
HOST_MARGIN = 1.25                  # on offload's host memory: pinned-buffer alignment, allocator slack
HOST_PER_RANK = 8.0 * GB            # one rank's own process: CUDA runtime, Python, its records and samples


class MemoryPlanError(ValueError):
    """A stage is planned far over the GPU's memory (a user error: the config asks too much)."""


@dataclass(frozen=True)
class ModelShape:
    params: int
    embed_params: int
    head_params: int                 # 0 when tied to the embeddings
    layer_params: int
    layers: int
    hidden: int
    kv_width: int
    intermediate: int
    heads: int
    vocab: int
    dtype_bytes: int


def model_shape(path: str, kind: str = "generative", num_labels: int = 2, dtype: str = "auto") -> ModelShape:
    """Parameter counts of the real architecture class, built without weights."""
    import torch
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification

    from models.builders import torch_dtype

    generates = kind_of(kind).generates
    config = AutoConfig.from_pretrained(path)
    with init_empty_weights():
        if generates:
            model = AutoModelForCausalLM.from_config(config)
        else:
            config.num_labels = num_labels          # from_config takes no num_labels in transformers 5
            model = AutoModelForSequenceClassification.from_config(config)
    embed = model.get_input_embeddings().weight
    head = model.get_output_embeddings() if generates else None
    layer = (getattr(model.base_model, "layers", None) or model.base_model.encoder.layer)[0]   # decoder | BERT family
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    wanted = torch.bfloat16 if dtype in ("auto", "bf16_if_native") else torch_dtype(dtype)   # the GPUs planned for
    return ModelShape(
        params=sum(p.numel() for p in model.parameters()), embed_params=embed.numel(),
        head_params=0 if head is None or head.weight is embed else head.weight.numel(),
        layer_params=sum(p.numel() for p in layer.parameters()), layers=config.num_hidden_layers,
        hidden=config.hidden_size, kv_width=kv_heads * head_dim, intermediate=config.intermediate_size,
        heads=config.num_attention_heads, vocab=config.vocab_size,
        dtype_bytes=torch.empty((), dtype=wanted).element_size())


@dataclass(frozen=True)
class Layout:
    world: int
    ranks_per_node: int
    zero_stage: int
    offload_param: bool
    offload_optimizer: bool
    gradient_checkpointing: bool
    generative: bool
    chunk_tokens: int


def layer_bytes(m: ModelShape, tokens: int) -> float:
    """What one decoder layer saves for backward (+ the fp32 log-sum-exp of its attention)."""
    return tokens * m.dtype_bytes * (11 * m.hidden + 4 * m.kv_width + 4 * m.intermediate + m.heads)


def activation_bytes(m: ModelShape, tokens: int, checkpointing: bool) -> float:
    """What the forward keeps until backward: every layer's saved tensors, or (checkpointing) each layer's input
    hidden state; and the embeddings' and final norm's."""
    outside = tokens * m.dtype_bytes * 4 * m.hidden
    if checkpointing:
        return tokens * m.dtype_bytes * m.layers * m.hidden + outside
    return m.layers * layer_bytes(m, tokens) + outside


def logits_bytes(m: ModelShape, labelled: int, dtype_bytes: int) -> float:
    """One chunk: the logits (upcast to fp32 when they are not), log-softmax and its gradient."""
    return labelled * m.vocab * (12 + (dtype_bytes if dtype_bytes != 4 else 0))


def stage_terms(m: ModelShape, lay: Layout, seq_len: int, sp: int, labelled: int | None = None) -> dict:
    """Bytes per rank, by term, for one stage; `passing`: the larger of the loss's logits chunk and the layer
    that checkpointing recomputes, which are never alive together."""
    b, p, world = m.dtype_bytes, m.params, lay.world
    tokens = -(-seq_len // sp)
    zero3 = lay.zero_stage == 3
    live = (max(m.embed_params, m.head_params) + m.layer_params + min(PREFETCH_BUCKET, m.layer_params)) * b
    params = live + (0 if lay.offload_param else p / world * b) if zero3 else p * b
    grad_shard = p / world if lay.zero_stage >= 2 else p
    grads = min(p, REDUCE_BUCKET) * b + (0 if lay.offload_optimizer else grad_shard * 4)
    optimizer = 0 if lay.offload_optimizer else 12 * p / (world if lay.zero_stage >= 1 else 1)
    attention = 8 * m.kv_width * tokens * b if sp > 1 else 0
    chunk = min(labelled if labelled is not None else lay.chunk_tokens, lay.chunk_tokens, tokens)
    return {"params": params, "grads": grads, "optimizer": optimizer,
            "activations": activation_bytes(m, tokens, lay.gradient_checkpointing),
            "attention": attention, "passing": max(logits_bytes(m, chunk, b) if lay.generative else 0.0,
                                                   layer_bytes(m, tokens) if lay.gradient_checkpointing else 0.0),
            "reserve": RUNTIME_RESERVE}


def host_bytes_per_node(m: ModelShape, lay: Layout) -> float:
    """CPU memory that offload holds on one node: fp32 master weights, Adam moments and fp32
    gradients (optimizer offload), and the 16-bit parameter partitions (parameter offload)."""
    share = m.params * min(lay.world, lay.ranks_per_node) / lay.world
    return share * ((16 if lay.offload_optimizer else 0) + (m.dtype_bytes if lay.offload_param else 0))


@dataclass
class StageRow:
    name: str
    seq_len: int
    sp: int
    terms: dict
    smallest_sp: int | None

    @property
    def total(self) -> float:
        return sum(self.terms.values())


def plan_rows(curriculum: CurriculumConfig, parallel: ParallelConfig, limit: float, m: ModelShape,
              lay: Layout) -> list[StageRow]:
    rows = []
    for stage in curriculum.stages:
        sp = stage_sp_size(parallel, stage)
        fits = [k for k in range(1, lay.world + 1) if lay.world % k == 0
                and sum(stage_terms(m, lay, stage.max_seq_len, k).values()) <= limit]
        rows.append(StageRow(stage.name, stage.max_seq_len, sp, stage_terms(m, lay, stage.max_seq_len, sp),
                             fits[0] if fits else None))
    return rows


def gpu_bytes(plan: PlanConfig) -> float:
    if plan.gpu_mem_gb:
        return plan.gpu_mem_gb * GB
    if plan.gpu is None:
        raise ValueError(f"the plan needs plan.gpu=<one of {', '.join(Gpu)}> or plan.gpu_mem_gb=<GB>")
    return GPU_MEMORY_GB[plan.gpu] * GB


@dataclass(frozen=True)
class RunPlan:
    """What the plan reads of a run: its stages and parallelism, the GPU it plans for, its checkpoint policy, the
    model's shape and the ranks' layout."""
    curriculum: CurriculumConfig
    parallel: ParallelConfig
    plan: PlanConfig
    trainer: TrainerConfig
    shape: ModelShape
    layout: Layout

    @classmethod
    def of_run(cls, cfg: SFTConfig, world: int, shape: ModelShape | None = None) -> RunPlan:
        """The run's plan over `world` ranks; `shape` read from model.name_or_path's config.json unless given."""
        ds = cfg.deepspeed
        lay = Layout(world=world, ranks_per_node=procs_per_node(cfg.slurm), zero_stage=ds.zero_stage,
                     offload_param=ds.offload_param, offload_optimizer=ds.offload_optimizer,
                     gradient_checkpointing=cfg.model.gradient_checkpointing,
                     generative=kind_of(cfg.task).generates, chunk_tokens=cfg.trainer.loss_chunk_tokens)
        return cls(cfg.curriculum, cfg.parallel, cfg.plan, cfg.trainer, shape or run_model_shape(cfg.model, cfg.task),
                   lay)


def table(rows: list[StageRow], limit: float, m: ModelShape, lay: Layout) -> str:
    head = ("| stage | tokens | sp | params | grads | optim | activations | ring kv | logits or layer | reserve | "
            f"total (GB of {limit / GB:.0f}) | fits | smallest sp |")
    lines = [head, "|" + "---|" * 13]
    for r in rows:
        t = {k: f"{v / GB:.1f}" for k, v in r.terms.items()}
        lines.append(f"| {r.name} | {r.seq_len:,} | {r.sp} | {t['params']} | {t['grads']} | {t['optimizer']} | "
                     f"{t['activations']} | {t['attention']} | {t['passing']} | {t['reserve']} | {r.total / GB:.1f} | "
                     f"{'yes' if r.total <= limit else 'NO'} | {r.smallest_sp or 'none'} |")
    lines.append(f"host memory for offload: {host_bytes_per_node(m, lay) / GB:.0f} GB per node "
                 f"({min(lay.world, lay.ranks_per_node)} ranks of {lay.world}; ZeRO-{lay.zero_stage}, offload params "
                 f"{lay.offload_param}, optimizer {lay.offload_optimizer}, gradient checkpointing "
                 f"{lay.gradient_checkpointing}); a SLURM job asks for {host_request_gb(m, lay)} GB per node "
                 "(slurm.mem's default)")
    return "\n".join(lines)


def run_model_shape(model: ModelConfig, task: TaskConfig) -> ModelShape:
    from models.builders import resolve_model_path
    kind = kind_of(task)
    return model_shape(resolve_model_path(model.name_or_path), kind.name, len(kind.labels(task)), model.dtype)


def host_request_gb(m: ModelShape, lay: Layout) -> int:
    """Host memory to ask for per node (`slurm.mem`'s default): offload's share with a margin, plus
    each rank's own process."""
    ranks = min(lay.world, lay.ranks_per_node)
    return math.ceil((host_bytes_per_node(m, lay) * HOST_MARGIN + HOST_PER_RANK * ranks) / GB)


def make_plan(run: RunPlan, limit: float | None = None) -> tuple[list[StageRow], str]:
    """The plan's rows and table against `limit` bytes per GPU (default: plan.gpu / plan.gpu_mem_gb)."""
    limit = gpu_bytes(run.plan) if limit is None else limit
    rows = plan_rows(run.curriculum, run.parallel, limit, run.shape, run.layout)
    return rows, table(rows, limit, run.shape, run.layout)


def check_before_training(run: RunPlan, gpu_total_bytes: float) -> str | None:
    """On GPUs: None when every stage fits; the table as a warning when one does not; an error
    when one is over by more than plan.max_over."""
    rows, text = make_plan(run, limit=gpu_total_bytes)
    worst = max(r.total / gpu_total_bytes for r in rows)
    if worst > run.plan.max_over:
        raise MemoryPlanError(f"the memory plan puts a stage at {worst:.2f}x this GPU's memory (more than "
                          f"plan.max_over={run.plan.max_over}); raise the stage's sp_size or offload:\n{text}")
    return text if worst > 1 else None


def disk_plan(run: RunPlan) -> str:
    """Per stage the size of one mid-stage checkpoint and of the stage export, and the run's peak disk
    under trainer.keep_checkpoints (an upper bound under LoRA, whose checkpoints hold only the adapters'
    optimizer state)."""
    t, m = run.trainer, run.shape
    ckpt = checkpoint_bytes(m.params, m.params, run.layout.zero_stage, m.dtype_bytes)
    export = export_bytes(m.params, m.dtype_bytes)
    lines = ["| stage | checkpoint (GB) | stage export (GB) |", "|---|---|---|"]
    lines += [f"| {s.name} | {ckpt / GB:.1f} | {export / GB:.1f} |" for s in run.curriculum.stages]
    n = len(run.curriculum.stages)
    peak = peak_disk_bytes(n, ckpt, export, t.keep_checkpoints, bool(t.save_every))
    if not t.save_every:
        why = f"{n} stage exports; no mid-stage checkpoints (trainer.save_every=0)"
    elif t.keep_checkpoints is None:
        why = "trainer.keep_checkpoints=null keeps every mid-stage checkpoint: unbounded"
    else:
        why = (f"{n} stage exports + {t.keep_checkpoints + 1} checkpoints: trainer.keep_checkpoints="
               f"{t.keep_checkpoints} kept while the next one is written, every {t.save_every} steps")
    lines.append(f"peak disk of the run: {peak / GB:.0f} GB ({why})")
    return "\n".join(lines)


def planned_world_size(plan: PlanConfig, slurm: SlurmConfig) -> int:
    """`plan.world_size`, else the SLURM job's (what `slurm/submit.py` renders)."""
    return plan.world_size or job_world_size(slurm)

