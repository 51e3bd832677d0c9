"""Every rule about a configuration that the configuration alone decides: cross-key rules, what a kind of
annotator refuses, what an encoder backbone can be trained for, the layout of the ranks. Each entry point
calls these before anything loads and before any process group or job exists, and they are the one home of
the rules' one-line messages. A fact of the machine or of the model files (is there CUDA, is the model an
encoder) comes in as an argument; the data's directories, files and rows are checked on the data floor
(`data_builders.sources.check_data_files`)."""
from __future__ import annotations

from configs.choices import DataSource, EncoderHead, EvalMethod, TaskKind, TokenSpans
from configs.schema import (
    CurriculumConfig,
    DataConfig,
    EvalConfig,
    GroundingConfig,
    ModelConfig,
    OptimConfig,
    ParallelConfig,
    SFTConfig,
    StageConfig,
    TaskConfig,
    TrainerConfig,
    stage_sp_size,
)

ALL = "all"          # a bucket that is every record
UNION = "+"          # "S+M": a bucket that is the union of its parts


class ConfigError(ValueError):
    """A configuration a user can fix: one line naming the keys, what was expected and what was found."""


def needed_buckets(stage_buckets: list[str], eval_buckets: list[str], evaluates: bool) -> list[str]:
    """The length buckets a run builds: its stages' and its evaluation's. A stage over "all" takes the
    evaluation's buckets even without evaluation (they say what the corpus is built in)."""
    names = list(stage_buckets) + (list(eval_buckets) if evaluates or ALL in stage_buckets else [])
    names = [part for n in names if n != ALL for part in n.split(UNION)]
    return sorted(set(names), key=names.index)


def run_buckets(curriculum: CurriculumConfig, evaluation: EvalConfig) -> list[str]:
    """The buckets a run (training, or `eval/run.py`) builds, from its stages and its evaluation."""
    return needed_buckets([s.bucket for s in curriculum.stages], list(evaluation.buckets), evaluation.enabled)


def check_training(cfg: SFTConfig, world: int, *, encoder: bool, cuda: bool) -> None:
    """A training run of `world` ranks (train/sft.py, and slurm/submit.py for the job's ranks)."""
    if not cfg.curriculum.stages:
        raise ConfigError("curriculum.stages is empty: at least one stage is needed")
    check_task(cfg.task)
    if encoder:
        _check_encoder(cfg.model, cfg.task, cfg.data,
                       max(stage_sp_size(cfg.parallel, s) for s in [None, *cfg.curriculum.stages]))
    check_parallel(cfg, world, cuda)
    _check_trainer(cfg.model, cfg.trainer)
    if cfg.eval.backend == "openai":
        raise ConfigError("eval.backend=openai sends prompts to a served judge: that is eval/run.py's, not a "
                          "training run's final evaluation (which scores the run's own export); use eval.backend=hf "
                          "or vllm here")
    if cfg.data.folds and not cfg.eval.enabled:
        raise ConfigError(f"data.folds={cfg.data.folds} scores every record in its fold's test part: it needs "
                          "eval.enabled=true")
    check_only_folds(cfg.data.folds, cfg.data.only_folds)
    known = set(cfg.data.bucket_budgets)
    for name in run_buckets(cfg.curriculum, cfg.eval):
        if name not in known:
            raise ConfigError(f"bucket {name!r} (curriculum.stages / eval.buckets) is not in "
                              f"data.bucket_budgets {sorted(known)}")
    check_data(cfg.data)


def _check_trainer(model: ModelConfig, t: TrainerConfig) -> None:
    layers = model.trainable_layers
    if layers is not None and (layers < 1 or model.lora.enabled):
        raise ConfigError(f"model.trainable_layers={layers}: expected null (train every layer) or N >= 1 top layers "
                          f"trained in full, without LoRA adapters (model.lora.enabled={model.lora.enabled})")
    if t.keep_checkpoints is not None and t.keep_checkpoints < 1:
        raise ConfigError(f"trainer.keep_checkpoints: expected null (keep all) or at least 1 (a run always keeps "
                          f"its newest mid-stage checkpoint), found {t.keep_checkpoints}")
    if t.eval_every < 0 or t.early_stopping_patience < 0 or (t.early_stopping_patience and not t.eval_every):
        raise ConfigError(f"trainer.early_stopping_patience={t.early_stopping_patience} counts validation points: it "
                          f"needs trainer.eval_every > 0, found {t.eval_every} (both >= 0)")


def check_evaluation(evaluation: EvalConfig, data: DataConfig, task: TaskConfig) -> None:
    """`eval/run.py`: one method over one test split (or each fold's, for the training-free methods)."""
    method = evaluation.method
    if evaluation.export and method != EvalMethod.grounding:
        raise ConfigError(f"eval.export={evaluation.export} writes a fitted grounding annotator "
                          f"(eval.method=grounding), "
                          f"found eval.method={method}; a trained model's export is written by train/sft.py "
                          "(<run>/checkpoints/<i>-<stage>/hf)")
    if evaluation.export_only and not (evaluation.export and data.folds):
        raise ConfigError(f"eval.export_only=true fits a cross-validated recipe on every record without its folds: it "
                          f"needs eval.export and data.folds > 0, found eval.export={evaluation.export}, "
                          f"data.folds={data.folds}")
    if data.folds and method == EvalMethod.annotator:
        raise ConfigError(f"data.folds={data.folds}: eval/run.py scores one model on one test split; a "
                          "fold's export is scored with data.folds=0 data.root=<run>/folds/fold_<i>")
    if method == EvalMethod.grounding and data.source != DataSource.records:
        raise ConfigError(f"eval.method=grounding reads records with a source and a response: it needs "
                          f"data.source=records, found data.source={data.source}")
    g = evaluation.grounding
    encoder_only = {"encoder_twins": g.encoder_twins, "encoder_head": g.encoder_head != EncoderHead.unit,
                    "encoder_edited_spans": g.encoder_edited_spans, "encoder_patience": g.encoder_patience is not None}
    if g.encoder_fitted:
        _check_fitted_encoder(g, encoder_only)
    if g.encoder_from and g.encoder:
        raise ConfigError(f"eval.grounding.encoder_from={g.encoder_from} goes on fine-tuning the unit encoders fitted "
                          f"there, and eval.grounding.encoder={g.encoder} fine-tunes new ones: unset one of them")
    for key, set_ in encoder_only.items():
        if set_ and not g.encoder and not g.encoder_fitted and not g.encoder_from:
            raise ConfigError(f"eval.grounding.{key}={getattr(g, key)} shapes how the unit encoder learns: it needs "
                              "eval.grounding.encoder (embedded:minilm, say), found none")
    if g.encoder_patience is not None and g.encoder_patience < 1:
        raise ConfigError(f"eval.grounding.encoder_patience: expected the epochs without a better validation figure "
                          f"before stopping, at least 1 (or null: no early stopping), found {g.encoder_patience}")
    saved_head = g.encoder_fitted or g.encoder_from      # the head is the saved encoders'
    if g.encoder_token_spans != TokenSpans.whole_units and g.encoder_head != EncoderHead.token and not saved_head:
        raise ConfigError(f"eval.grounding.encoder_token_spans={g.encoder_token_spans} marks the tokens the token head "
                          f"marks: it needs eval.grounding.encoder_head=token, found {g.encoder_head}")
    if g.encoder_token_threshold is not None and not 0 < g.encoder_token_threshold < 1:
        raise ConfigError(f"eval.grounding.encoder_token_threshold: expected a probability between 0 and 1 (or null: "
                          f"chosen on validation), found {g.encoder_token_threshold}")
    if method == EvalMethod.nli and not evaluation.nli.model:
        raise ConfigError("eval.method=nli needs eval.nli.model=<a local Hugging Face NLI model directory>")
    if method == EvalMethod.rag and task.evidence_sentences:
        raise ConfigError("eval.method=rag picks each summary block's article window itself; it needs "
                          f"task.evidence_sentences=0, found {task.evidence_sentences}")
    if data.only_folds is not None:
        raise ConfigError(f"data.only_folds={list(data.only_folds)} picks the folds train/sft.py trains; eval/run.py "
                          "prepares and scores every fold of data.folds in one launch: unset it")
    check_data(data)


def check_only_folds(folds: int, only: list[int] | None) -> None:
    if only is not None and (not folds or any(not 0 <= i < folds for i in only)):
        raise ConfigError(f"data.only_folds: expected fold numbers 0 to {folds - 1} of data.folds={folds}, "
                          f"found {list(only)}" + ("" if folds else " (data.folds is 0: no cross-validation)"))


def check_data(data: DataConfig) -> None:
    """What `data.*` asks of itself; its directories and files are the data floor's to check."""
    if data.folds:
        if data.source != DataSource.records:
            raise ConfigError(f"data.folds={data.folds} deals a records directory into folds: it needs "
                              f"data.source=records, found {data.source}")
        if not 0 <= data.fold_val_fraction < 1:
            raise ConfigError(f"data.fold_val_fraction: expected 0 <= x < 1, found {data.fold_val_fraction}")
    if data.source == DataSource.anah_embedded and data.corpus.language != "zh":
        raise ConfigError(f"data.source=anah_embedded builds Chinese ANAH-style answers: it needs "
                          f"data.corpus.language=zh, found {data.corpus.language}")
    if data.source == DataSource.mixture and not data.mixture:
        raise ConfigError("data.source=mixture needs data.mixture: a list of {name, root, weight}")


def check_task(task: TaskConfig) -> None:
    """The task's own keys, and what its kind refuses."""
    if task.evidence_sentences < 0:
        raise ConfigError(f"task.evidence_sentences: expected 0 (the whole source) or k > 0, "
                          f"found {task.evidence_sentences}")
    if task.kind == TaskKind.discriminative and task.evidence_sentences and task.head != "binary":
        raise ConfigError(f"task.evidence_sentences={task.evidence_sentences} scores a record by its worst sentence: a "
                          f"discriminative annotator needs task.head=binary, found {task.head!r}")
    if task.kind == TaskKind.spans and (task.evidence_sentences or task.head != "binary"):
        raise ConfigError(f"task.kind=spans labels the response's own tokens: it needs task.evidence_sentences=0 and "
                          f"task.head=binary, found {task.evidence_sentences} and {task.head}")
    if task.response_lm and task.kind != TaskKind.generative:
        raise ConfigError(f"task.response_lm=true trains the LM head on the response: it needs task.kind=generative, "
                          f"found {task.kind!r}")


def _check_fitted_encoder(g: GroundingConfig, encoder_only: dict[str, bool]) -> None:
    """eval.grounding.encoder_fitted reads encoders fitted elsewhere: nothing here may say how to fine-tune one."""
    if g.encoder or g.encoder_from:
        tuning = f"encoder={g.encoder} fine-tunes new ones" if g.encoder else \
            f"encoder_from={g.encoder_from} fine-tunes those fitted there"
        raise ConfigError(f"eval.grounding.encoder_fitted={g.encoder_fitted} reads the unit encoders fitted there, and "
                          f"eval.grounding.{tuning}: unset one of them")
    for key, set_ in encoder_only.items():
        if set_:
            raise ConfigError(f"eval.grounding.{key}={getattr(g, key)} shapes how a unit encoder learns, and "
                              f"eval.grounding.encoder_fitted={g.encoder_fitted} reads encoders already fitted "
                              "(their head comes from its grounding.json): unset it")


def trains_on_encoder(task: TaskConfig) -> bool:
    """Whether an encoder backbone (BERT family) can be trained for the task: a binary head or a span head."""
    return task.kind == TaskKind.spans or (task.kind == TaskKind.discriminative and task.head == "binary")


def _check_encoder(model: ModelConfig, t: TaskConfig, data: DataConfig, sp: int) -> None:
    """What an encoder backbone can be trained for: a binary or span head on records, at sequence-parallel
    degree 1 (`sp`: the run's largest), without packing or LoRA."""
    where = f"model.name_or_path={model.name_or_path} is an encoder"
    if not trains_on_encoder(t):
        raise ConfigError(f"{where}: it trains a binary head (task.kind=discriminative task.head=binary) or a span "
                          f"head (task.kind=spans), found task.kind={t.kind} task.head={t.head}")
    if data.source != DataSource.records:
        raise ConfigError(f"{where}: it reads the (evidence, response) pairs of records (data.source=records: a "
                          f"converted benchmark, your own JSONL); data.source={data.source} builds Chinese samples "
                          "for a decoder's chat prompt")
    if sp > 1 or data.packing or model.lora.enabled:
        raise ConfigError(f"{where}: it reads (evidence, response) pairs in windows of its own length, whole on one "
                          f"device and in full: it needs parallel.sp_size=1 (found {sp}), data.packing=false and "
                          "model.lora.enabled=false")


def sp_key(stage: StageConfig | None) -> str:
    """The key a stage's sequence-parallel degree comes from (None: the run's default)."""
    own = stage is not None and stage.sp_size is not None
    return f"curriculum stage {stage.name!r} sp_size" if own else "parallel.sp_size"


def check_sp(key: str, sp: int, world: int) -> None:
    if sp < 1 or world % sp:
        raise ConfigError(f"{key}={sp} must be >= 1 and divide the number of ranks {world} (world_size % sp_size == 0)")


def stage_grad_accum(optim: OptimConfig, stage: StageConfig | None) -> tuple[int, str]:
    """A stage's gradient accumulation and the key it comes from: its own `grad_accum`, else
    `optim.grad_accum` (also for stage None, the run's default)."""
    if stage is not None and stage.grad_accum is not None:
        return stage.grad_accum, f"curriculum stage {stage.name!r} grad_accum"
    return optim.grad_accum, "optim.grad_accum"


def check_parallel(cfg: SFTConfig, world: int, cuda: bool) -> None:
    check_ring(cfg.parallel, str(cfg.model.dtype), cuda)
    for stage in [None, *cfg.curriculum.stages]:
        sp, key = stage_sp_size(cfg.parallel, stage), sp_key(stage)
        check_sp(key, sp, world)
        accum, accum_key = stage_grad_accum(cfg.optim, stage)
        if accum < 1:
            raise ConfigError(f"{accum_key}={accum}: expected >= 1")
        if cfg.data.packing and (cfg.task.kind != TaskKind.generative or cfg.optim.micro_batch_size != 1
                                 or (sp > 1 and cfg.parallel.sp_mode != "zigzag_varlen")):
            raise ConfigError("data.packing=true packs generative samples into one row per micro-batch: it needs "
                              f"task.kind=generative (found {cfg.task.kind}), optim.micro_batch_size=1 (found "
                              f"{cfg.optim.micro_batch_size}) and, with {key} > 1, parallel.sp_mode=zigzag_varlen")
        if sp > 1 and cfg.optim.micro_batch_size != 1:
            raise ConfigError(f"{key}={sp} needs optim.micro_batch_size=1 (found {cfg.optim.micro_batch_size}); "
                              "raise optim.grad_accum instead")


def check_ring(parallel: ParallelConfig, dtype: str, cuda: bool) -> None:
    impl, kernel = parallel.ring_impl, parallel.ring_kernel
    needs_cuda = {"parallel.ring_impl=ring_flash_attn": impl == "ring_flash_attn",
                  "parallel.ring_kernel=flash_attn": kernel == "flash_attn"}
    for key, wanted in needs_cuda.items():
        if wanted and not cuda:
            raise ConfigError(f"{key} runs on CUDA only, and this machine has no CUDA device; use the defaults "
                              "(parallel.ring_impl=ring, parallel.ring_kernel=torch)")
    if impl == "ring_flash_attn" and dtype in ("float32", "fp32"):
        raise ConfigError(f"parallel.ring_impl=ring_flash_attn with model.dtype={dtype}: its zigzag "
                          "backward is wrong for fp32 inputs; use bf16 or parallel.ring_impl=ring")
