"""DeepSpeed engines: config, model creation (partitioned under ZeRO-3), export."""
from __future__ import annotations

import functools
import math
import os
import shutil
from pathlib import Path

import torch

from configs.schema import (
    DeepSpeedConfig,
    ModelConfig,
    OptimConfig,
    ParallelConfig,
    SFTConfig,
    TaskConfig,
    stage_sp_size,
)
from models.annotator import WRAPPERS, hf_model, load_annotator, train_top_layers
from models.builders import torch_dtype
from models.export_spec import AnnotatorSpec, write_model_card
from models.kinds import kind_of
from models.lora import merged_copy


def ds_config(ds: DeepSpeedConfig, opt: OptimConfig, dtype: str, world_size: int, grad_accum: int | None = None,
              load_universal: bool = False) -> dict:
    grad_accum = opt.grad_accum if grad_accum is None else grad_accum
    if ds.zero_stage not in (0, 2, 3):
        raise ValueError(f"deepspeed.zero_stage: expected 0, 2 or 3, found {ds.zero_stage}")
    if ds.offload_param and ds.zero_stage != 3:
        raise ValueError("deepspeed.offload_param needs deepspeed.zero_stage=3")
    zero: dict = {"stage": ds.zero_stage}
    if ds.zero_stage == 3:
        zero.update(stage3_gather_16bit_weights_on_model_save=True,
                    stage3_param_persistence_threshold=0)
        if ds.offload_param:
            zero["offload_param"] = {"device": "cpu", "pin_memory": torch.cuda.is_available()}
    if ds.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": torch.cuda.is_available()}
    config = {
        "train_micro_batch_size_per_gpu": opt.micro_batch_size,
        "gradient_accumulation_steps": grad_accum,
        "train_batch_size": opt.micro_batch_size * grad_accum * world_size,
        "gradient_clipping": opt.grad_clip,
        "zero_optimization": zero,
        "zero_allow_untested_optimizer": True,
        "bf16": {"enabled": torch_dtype(dtype) == torch.bfloat16},
        "steps_per_print": 1_000_000_000,
        "wall_clock_breakdown": False,
    }
    if load_universal:        # a checkpoint saved on another number of ranks (train/checkpoint.py)
        config["checkpoint"] = {"load_universal": True}
    if ds.offload_optimizer:  # DeepSpeed's CPU Adam; built by DeepSpeed from this block
        config["optimizer"] = {"type": "AdamW", "params": _adam_params(opt, opt.lr)}
    return config


def _adam_params(opt: OptimConfig, lr: float) -> dict:
    return {"lr": lr, "betas": list(opt.betas), "eps": opt.eps, "weight_decay": opt.weight_decay}


def lr_lambda(kind: str, total_steps: int, warmup_steps: int):
    """Multiplier of the stage's lr at optimizer step t (0-based): linear warmup, then cosine or
    linear decay to 0, or constant (`optim.scheduler`)."""

    def f(t: int) -> float:
        if t < warmup_steps:
            return (t + 1) / warmup_steps
        if kind == "constant":
            return 1.0
        progress = min(1.0, (t - warmup_steps) / max(1, total_steps - warmup_steps))
        return 1.0 - progress if kind == "linear" else 0.5 * (1.0 + math.cos(math.pi * progress))
    return f


def attention_backend(model: ModelConfig, parallel: ParallelConfig, packing: bool, sp_size: int) -> str:
    """Sequence parallelism and packed rows swap in the ring backend for training (it keeps packed
    documents apart); inference keeps the configured one."""
    if sp_size == 1 and not packing:
        return model.attn_implementation
    from models.attention.hf_ring import register

    return register(parallel.ring_impl, parallel.ring_kernel)


def load_model(model: ModelConfig, task: TaskConfig, path: str, attn_implementation: str, lora: bool = False):
    return load_annotator(path, task.kind, task.head, model.dtype, attn_implementation,
                          model.lora if lora else None, model.yarn_factor)


def build_engine(cfg: SFTConfig, weights_dir: str, world_size: int, lr: float, total_steps: int,
                 sp_size: int | None = None, grad_accum: int | None = None, load_universal: bool = False):
    """A fresh DeepSpeed engine (new optimizer and scheduler) on the weights in `weights_dir`."""
    import deepspeed
    from transformers.integrations import HfDeepSpeedConfig
    from transformers.integrations.deepspeed import unset_hf_deepspeed_config

    config = ds_config(cfg.deepspeed, cfg.optim, cfg.model.dtype, world_size, grad_accum, load_universal)
    if "optimizer" in config:
        config["optimizer"]["params"]["lr"] = lr
    keep_alive = HfDeepSpeedConfig(config) if cfg.deepspeed.zero_stage == 3 else None
    try:
        sp = stage_sp_size(cfg.parallel, None) if sp_size is None else sp_size
        backend = attention_backend(cfg.model, cfg.parallel, cfg.data.packing, sp)
        model = load_model(cfg.model, cfg.task, weights_dir, backend, lora=cfg.model.lora.enabled)
    finally:
        del keep_alive
        unset_hf_deepspeed_config()
    hf = hf_model(model)
    if cfg.model.trainable_layers:
        train_top_layers(hf, cfg.model.trainable_layers)
    if cfg.model.gradient_checkpointing:
        enable_checkpointing(hf)
        if cfg.model.lora.enabled:
            hf.enable_input_require_grads()   # frozen embeddings: checkpointed blocks still need grads
    hf.config.use_cache = False
    model = kind_of(cfg.task).for_training(model, cfg.trainer.loss_chunk_tokens)
    optimizer = None if "optimizer" in config else torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], **_adam_params(cfg.optim, lr), fused=cfg.optim.fused)
    warmup = int(cfg.optim.warmup_ratio * total_steps)
    schedule = lr_lambda(cfg.optim.scheduler, total_steps, warmup)
    _ask_for_the_cpu_once()
    engine, *_ = deepspeed.initialize(
        model=model, optimizer=optimizer, model_parameters=model.parameters(), config=config,
        lr_scheduler=lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, schedule))
    if world_size == 1 and optimizer is not None and engine.optimizer is optimizer:
        # one rank, our optimizer unwrapped (no ZeRO, no bf16 master weights): DeepSpeed's gradient all-reduce
        # would only copy every gradient into a flat buffer and back (7% of a SmolLM2 step at 512 tokens on CPU)
        engine.enable_backward_allreduce = False
    return engine


def _ask_for_the_cpu_once() -> None:
    """DeepSpeed's op builder asks py-cpuinfo three times which CPU it compiles the CPU Adam optimizer for,
    and each answer starts a Python subprocess (1.2 s on a 2-core machine, on every rank of every launch).
    The CPU does not change while a process runs: the first answer is kept."""
    import cpuinfo

    if not hasattr(cpuinfo.get_cpu_info, "cache_info"):
        cpuinfo.get_cpu_info = functools.cache(cpuinfo.get_cpu_info)


def enable_checkpointing(hf) -> None:
    """Activation checkpointing, non-reentrant; `gradient_checkpointing_enable` is the name of
    transformers releases before `activation_checkpointing_enable` (a deprecated alias since)."""
    enable = getattr(hf, "activation_checkpointing_enable", None)
    if enable is not None:
        enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        hf.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def release_engine(engine) -> None:
    """`engine.destroy()`, then drop what DeepSpeed keeps of the engine after it, so that a stage's
    model, optimizer state and process-group references are freed when the stage ends:
    - ZeRO-3 lists every engine's model in a module-level stack (`parameter_offload.FWD_MODULE_STACK`);
    - the model's forward hooks point back at the engine;
    - the parameter coordinator memoizes `__params_to_release` in a class-wide lru_cache, keyed by
      coordinator and module.
    """
    import deepspeed.runtime.zero.parameter_offload as offload
    from deepspeed.runtime.zero.partitioned_param_coordinator import PartitionedParameterCoordinator

    own = {id(m) for m in engine.module.modules()}
    engine.destroy()
    for hook in (getattr(engine, "module_forward_pre_hook", None), getattr(engine, "module_forward_post_hook", None)):
        if hook is not None:
            hook.remove()
    offload.FWD_MODULE_STACK[:] = [m for m in offload.FWD_MODULE_STACK if id(m) not in own]
    memoized = vars(PartitionedParameterCoordinator)["_PartitionedParameterCoordinator__params_to_release"]
    for cell in memoized.__closure__ or ():        # under DeepSpeed's nvtx wrapper
        if hasattr(cell.cell_contents, "cache_clear"):
            cell.cell_contents.cache_clear()


def consolidated_state_dict(engine, zero_stage: int) -> dict:
    """Full weights on rank 0 (a collective under ZeRO-3: every rank must call it)."""
    if zero_stage == 3:
        return engine._zero3_consolidated_16bit_state_dict()
    return engine.module.state_dict()


def export_hf(engine, model_config: ModelConfig, task: TaskConfig, zero_stage: int, weights_dir: str, tokenizer,
              out_dir: Path, is_main: bool, spec: AnnotatorSpec | None = None) -> None:
    """Write a `from_pretrained`-loadable model + tokenizer, and with `spec` its `annotator.json`
    and model card, atomically (tmp dir, then rename).

    With LoRA, rank 0 loads the weights the stage started from, merges the trained adapters
    into them, and writes the merged model.
    """
    state = consolidated_state_dict(engine, zero_stage)
    if not is_main:
        return
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    wrapped = isinstance(engine.module, WRAPPERS)
    state = {(k.removeprefix("model.") if wrapped else k): v.detach().to("cpu") for k, v in state.items()}
    if model_config.lora.enabled:
        base = hf_model(load_model(model_config, task, weights_dir, model_config.attn_implementation))
        model = merged_copy(base, state, model_config.lora, kind_of(task).lora_task)
        model.save_pretrained(tmp, safe_serialization=True)
    else:
        hf_model(engine.module).save_pretrained(tmp, state_dict=state, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    if spec is not None:
        spec.save(tmp)
        write_model_card(tmp, spec)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    os.rename(tmp, out_dir)
