"""Structured schemas of every config, registered with Hydra's ConfigStore: `sft_schema` (training,
`eval/run.py`, `slurm/submit.py`, `train.tools.plan`) and `score_schema` (`eval/score.py`).

`sft.yaml` lists `sft_schema` first in its defaults, so every group option and
every experiment is merged onto these dataclasses: a misspelt key, a value
of the wrong type or a value outside a closed set (`configs.choices`)
fails when the config is composed. This module sits below every package that
reads a config (it imports `configs.choices` only).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from configs.choices import (
    Backend,
    CorpusLanguage,
    DataSource,
    Dtype,
    EncoderHead,
    EvalMethod,
    EvidenceUnit,
    Gpu,
    Head,
    LoggerMode,
    NliMethod,
    NliScore,
    Resume,
    RingImpl,
    RingKernel,
    Scheduler,
    Scorer,
    SlurmMode,
    SpMode,
    TaskKind,
    ThresholdFor,
    TokenSpans,
)


@dataclass
class LoraSettings:
    enabled: bool = False
    r: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])


@dataclass
class ModelConfig:
    name_or_path: str | None = None   # local HF directory, or embedded:<name>
    dtype: Dtype = Dtype.auto             # auto: bf16 on GPU, fp32 on CPU; bf16_if_native: bf16 where native
    attn_implementation: str = "sdpa"
    gradient_checkpointing: bool = False
    yarn_factor: float | None = None      # YaRN: the window x this factor, for stages past the model's own
    lora: LoraSettings = field(default_factory=LoraSettings)   # adapters, merged into the export
    trainable_layers: int | None = None   # train the top N layers and the head; embeddings and the rest frozen


@dataclass
class TaskConfig:
    name: str = "longnovel_detection"
    template: str = "prompt_e"            # detection prompt (seed 000, Appendix I.2)
    kind: TaskKind = TaskKind.generative  # generative (LM loss on the answer) | discriminative (linear head)
    head: Head = Head.binary              # discriminative head: binary | anah | faithfulness
    class_weights: list[float] | None = None   # per-class loss weights (single-label heads)
    focal_gamma: float = 0.0              # > 0: focal loss instead of cross-entropy
    scorer: Scorer = Scorer.longnovel     # the final evaluation's scorer: longnovel | anah | binary | spans | uhgeval
    response_lm: bool = False             # generative: also predict the response's faithful sentences from the
                                          # source (a label for every faithful summary token, from the gold)
    evidence_unit: EvidenceUnit = EvidenceUnit.sentence   # what is judged with evidence_sentences: sentence |
                                          # clause (a sentence cut at ，；：/ , ; :)
    evidence_sentences: int = 0           # > 0: judge each response sentence against its k best-matching source
                                          # sentences (data_builders/model_inputs/evidence.py); a record scores its
                                          # worst one


@dataclass
class CorpusConfig:
    n_books: int = 8
    units_per_book: int = 48
    unit_chars_min: int = 1000
    unit_chars_max: int = 1400
    seed: int = 0
    test_books: int = 2
    val_books: int = 0                    # validation split (decision thresholds of binary heads)
    language: CorpusLanguage = CorpusLanguage.zh   # the books' language: LongNovel's Chinese, or English


@dataclass
class MixtureSource:
    name: str = MISSING
    root: str = MISSING                   # a records directory: train.jsonl (+ val.jsonl, test.jsonl)
    weight: float = 1.0                   # multiplies the source's training records (0.5: half, 2: twice)
    template: str | None = None        # prompt template of this source's records (default task.template)
    evaluate: bool = True                 # its val/test records join the evaluation


@dataclass
class SyntheticConfig:
    """Synthetic training records built from each fold's training part (data_builders/synthetic/twins.py)."""
    twins: int = 0                        # hallucinated twins per faithful record, each another edit kind
    swapped: float = 0.0                  # share of faithful records also paired with another record's source
    distractor: float = 0.0               # share of faithful records also given a distractor source (still faithful)
    edits: list[str] = field(default_factory=lambda: [
        "numerical", "temporal", "entity", "logical_inversion", "event_fabrication"])
    seed: int = 0


@dataclass
class DataConfig:
    source: DataSource = DataSource.embedded   # embedded | anah_embedded | records | longnovel_released | mixture
    root: str | None = None            # records: dir with train.jsonl/test.jsonl; released: dir of files
    mixture: list[MixtureSource] = field(default_factory=list)
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    bucket_budgets: dict[str, int] = field(default_factory=lambda: {
        "S": 2048, "M": 16384, "L": 32768, "XL": 65536, "XXL": 102400})
    min_fill: float = 0.75                # a context fills at least this much of its bucket budget
    max_skip_fraction: float = 0.05       # fail a stage when more of its samples are too long
    packing: bool = False                 # generative: pack samples into rows of max_seq_len (first-fit decreasing)
    num_proc: int = 1                     # processes that tokenise samples when the sample cache misses
    folds: int = 0                        # > 0 (data.source=records): k-fold cross-validation grouped by source over
                                          # every record of data.root, all folds in one launch (train/cross_validation)
    fold_val_fraction: float = 0.1        # share of a fold's training sources held out for its decision threshold
    fold_by: str = "source"               # what a fold's test part holds whole: "source", or a meta field such as
                                          # "domain" (data.folds = the number of domains: leave one domain out)
    synthetic: SyntheticConfig = field(default_factory=SyntheticConfig)   # data.folds: twins of each training part
    fold_extra_train: list[str] = field(default_factory=list)   # data.folds: records directories whose every record
                                          # joins each fold's training part (another benchmark), never val or test
    only_folds: list[int] | None = None   # train/sft.py with data.folds: these folds only ([]: deal them and stop),
                                          # for launches side by side on one output_dir; a launch that finds every
                                          # fold finished pools them


@dataclass
class StageConfig:
    name: str = MISSING
    bucket: str = MISSING                 # the length bucket the stage trains on ("S+M": several; "all": every record)
    max_seq_len: int = MISSING            # samples longer than this are skipped, never truncated
    epochs: float = 2.0
    max_steps: int | None = None       # a bridge stage sets a fixed number of steps
    lr: float | None = None            # default: optim.lr
    sp_size: int | None = None         # sequence-parallel degree of this stage (default: parallel.sp_size)
    grad_accum: int | None = None      # micro-batches per step (default: optim.grad_accum); a stage that
                                          # raises sp_size can raise this to keep the global batch


@dataclass
class CurriculumConfig:
    stages: list[StageConfig] = field(default_factory=list)


@dataclass
class ParallelConfig:
    sp_size: int = 1
    sp_mode: SpMode = SpMode.zigzag       # zigzag | zigzag_varlen (packed rows)
    ring_impl: RingImpl = RingImpl.ring   # ring (ours) | ring_flash_attn (CUDA, bf16 / fp16)
    ring_kernel: RingKernel = RingKernel.torch   # our ring's block kernel: torch (PyTorch flash) | flash_attn


@dataclass
class DeepSpeedConfig:
    zero_stage: int = 3                   # 0 (plain DDP), 2 or 3
    offload_param: bool = True            # ZeRO-3 only
    offload_optimizer: bool = True


@dataclass
class OptimConfig:
    lr: float = 5e-6
    weight_decay: float = 0.0
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    eps: float = 1e-8
    scheduler: Scheduler = Scheduler.cosine   # cosine | linear | constant, per stage
    warmup_ratio: float = 0.0
    grad_clip: float = 1.0
    fused: bool = True                        # torch's fused AdamW kernel (CPU, CUDA); false: its per-tensor loop
    micro_batch_size: int = 1
    grad_accum: int = 1


@dataclass
class TrainerConfig:
    seed: int = 42
    max_steps: int | None = None       # cap on the optimizer steps of every stage (smoke runs)
    stop_at_step: int | None = None    # stop after this global step, as a preempted job would
    save_every: int = 0                   # mid-stage checkpoint every N steps (0: stage ends only)
    keep_checkpoints: int | None = 2      # the run's newest N mid-stage checkpoints are kept (null: all)
    collective_timeout_s: int = 1800      # a collective that waits longer than this on a rank that hangs fails
    progress: bool = True
    verbose: bool = False                 # show library chatter: DeepSpeed's compiler probes, per-file progress bars
    loss_chunk_tokens: int = 1024         # labelled positions per chunk of LM-head logits (generative loss)
    eval_every: int = 0                   # > 0: score the validation split every N steps of a stage (curve.jsonl)
    early_stopping_patience: int = 0      # > 0: stop a stage after N validation points without a better MCC


@dataclass
class LoggerConfig:
    wandb: bool = False
    project: str = "hallucination-annotators"
    entity: str | None = None
    mode: LoggerMode = LoggerMode.auto    # auto: online with WANDB_API_KEY, else offline
    group: str | None = None
    tags: list[str] = field(default_factory=list)


@dataclass
class RagConfig:
    """The sliding-window RAG baseline (seed 000, Appendix D)."""
    embedder: str = "minilm"              # minilm (bundled all-MiniLM-L6-v2) or a local path (BGE-M3)
    article_chars: int = 5500
    summary_chars: int = 150
    top_k: int = 5


@dataclass
class NliConfig:
    """NLI-matrix baselines: SummaC zero-shot and HaluMap (seed 003)."""
    model: str | None = None           # a local Hugging Face NLI model (e.g. deberta-large-mnli)
    method: NliMethod = NliMethod.halumap # summac_zs | halumap
    score: NliScore = NliScore.contradiction   # halumap: contradiction (max-max) | entailment (max-mean)
    calibrate: bool = True                # halumap: subtract the source's self-NLI background
    block_chars: int = 0                  # source segments: 0 = sentences, else blocks of ~this many chars
    threshold: float | None = None     # default: chosen on the validation split, never on test
    batch_size: int = 16


@dataclass
class GroundingConfig:
    """eval.method=grounding (eval/baselines/grounding.py): what each response sentence says that its source does not,
    weighed by logistic regressions fitted on the train split, thresholds chosen on the validation split."""
    c: float = 1.0                     # inverse L2 strength of both regressions
    unit: EvidenceUnit = EvidenceUnit.sentence   # sentence | clause: what is judged and marked as a span
    embedder: str | None = None        # minilm | embedded:e5-small | a sentence-transformers directory: adds each
                                       # unit's cosine similarity to its closest source sentences (default: none)
    lm: str | None = None              # embedded:smollm2-135m | a local causal-LM directory: adds each unit's token
                                       # log-probabilities given the source and their gain over none (default: none)
    lm_source_tokens: int = 2048       # the LM reads the source's first this many tokens
    lm_cache_dir: str | None = None    # the token log-probabilities on disk (a run continues from them);
                                       # None: the user's cache
    negation: bool = False             # adds each unit's negation cues (not, never, n't; 不, 没...) and how many
                                       # more it has than its closest source sentence (by shared words)
    stem: bool = False                 # compares Latin-script words by their Snowball (English) stems: "companies"
                                       # is supported by "company" (default: the words as written)
    word_odds: bool = False            # adds to the response model each unit's unsupported words' log-odds of marking a
                                       # hallucinated train response (sum, least; learnt per fold, sources left out)
    response_by_task: bool = False     # a response regression per task type of the train split (with both labels),
                                       # beside the one for all that scores the other types (default: one for all,
                                       # the task type one of its features)
    cross_fit_by: str | None = None    # a record field (meta.domain): thresholds chosen on the train and val splits'
                                       # scores, each value's by a model fitted on the others' (a test part that is a
                                       # whole group, data.fold_by); the model then fits on both. Default: validation
    choose_among: list[str] | None = None   # feature sets, each its on-flags joined by "+" (stem+word_odds; "plain":
                                       # none of stem, negation, word_odds): each fold uses the one whose scores,
                                       # cross-fitted over choose_folds groups (data.fold_by) of its train and val
                                       # parts, rank them best (ROC AUC). Default: eval.grounding as set
    choose_folds: int = 5              # inner folds of choose_among (at most the groups there are)
    threshold: float | None = None     # the response's; default: chosen on validation for eval.threshold_for
    span_threshold: float | None = None   # a sentence's; default: chosen on validation for character F1
    encoder: str | None = None         # embedded:minilm | an encoder directory: fine-tuned per fit on (unit, its
                                       # encoder_evidence closest source pieces) to say whether the unit is
                                       # hallucinated; its logit joins the unit features (training units read the
                                       # logit of an encoder fitted on the other half of the train sources)
    encoder_fitted: str | None = None  # instead of encoder: a grounding run's fold directory or export; its unit
                                       # encoders (fine-tuned on another benchmark, say) are read as they are, every
                                       # unit by their mean, with its head, evidence and tokens per pair
    encoder_from: str | None = None    # instead of encoder: a grounding run's fold directory or export whose two
                                       # unit encoders (weights and head) each fit's two go on fine-tuning, each on
                                       # its half of the train sources neither saw (data.fold_extra_train's records
                                       # they saw are read by the one that did not); their head, evidence, length.
                                       # With encoder_patience, their start is epoch 0, kept unless an epoch beats it
    encoder_evidence: int = 2          # source pieces (by embedder, else MiniLM, similarity) beside each unit
    encoder_epochs: float = 1.0        # passes over the training units (with encoder_patience, the most)
    encoder_patience: int | None = None   # early stopping: after each epoch, each encoder's ROC AUC on (a sample of)
                                       # the other half's units; stop after this many epochs without a better one
                                       # and keep the best epoch's weights (LettuceDetect's recipe). None: no stopping
    encoder_lr: float = 5e-5
    encoder_max_len: int = 192         # tokens of a (unit, evidence) pair
    encoder_head: EncoderHead = EncoderHead.unit   # unit: one logit on [CLS], learnt from each unit's label | token:
                                       # one per unit token, learnt from which lie in a hallucinated span
                                       # (LettuceDetect); a unit's logit is its highest token's
    encoder_token_spans: TokenSpans = TokenSpans.whole_units   # with encoder_head=token, in_marked_units: each
                                       # marked unit narrowed to the tokens its head marks
                                       # (encoder_token_threshold); anywhere: every such token of the response
    encoder_token_threshold: float | None = 0.5   # with token spans, a token is marked when its probability (the
                                       # mean logit's sigmoid) reaches it: 0.5, a positive logit; None: chosen on
                                       # validation for character F1
    encoder_edited_spans: bool = False   # a hallucinated response without gold spans: its encoder labels from the
                                       # words its dataset says were edited (meta.edited_spans: SummEdits' words
                                       # that differ from the seed summary), else every unit hallucinated
    encoder_twins: int = 0             # hallucinated twins (data_builders/synthetic/twins.py) per faithful record that
                                       # each encoder also trains on, built from its own half of the train sources
                                       # (the regressions never see them); each twin's edited unit is labelled
    encoder_twin_edits: list[str] = field(default_factory=lambda: [
        "numerical", "temporal", "entity", "logical_inversion"])   # in-place edits: an inserted sentence is what
                                                                     # the unsupported-word counts already catch


@dataclass
class VllmConfig:
    """eval.backend=vllm (GPU only): YaRN as in seed 000, E.1."""
    yarn: str = "auto"                    # auto (x4 Qwen / InternLM, x8 Llama) | none | a factor, e.g. "4"
    tensor_parallel_size: int = 1
    max_model_len: int | None = None


@dataclass
class JudgeConfig:
    """eval.backend=openai: the prompts go to an OpenAI-compatible chat endpoint (`vllm serve`, SGLang,
    llama.cpp's server, `transformers serve`, a hosted API) instead of a model in this process."""
    base_url: str | None = None        # e.g. http://127.0.0.1:8000/v1
    model: str | None = None           # the model name the endpoint serves
    api_key_env: str | None = None     # the environment variable that holds the key (the key is never stored)
    temperature: float = 0.0
    system_prompt: str | None = None   # a system message before the template's own messages
    completions: bool = False          # true: the prompt as this process renders it (the local tokenizer's chat
                                       # template applied, or a completion template's plain text) to /v1/completions,
                                       # so the served model reads what it reads in process; false: the template's
                                       # messages to /v1/chat/completions (the endpoint applies its chat template)
    concurrency: int = 4                  # requests in flight at once
    max_retries: int = 6                  # 408 / 429 / 5xx / timeouts / dropped connections, with backoff
    timeout_s: float = 600.0              # per request
    cache_dir: str | None = None       # answers on disk by (model, messages, settings); None: the user's cache
    price_in: float | None = None      # per million prompt tokens: a cost line in the report
    price_out: float | None = None     # per million completion tokens


@dataclass
class BertScoreModel:
    model: str | None = None    # a local path; None: no BERTScore for this language
    num_layers: int = 8            # the layer bert-score reads (8 for bert-base-chinese, 17 for roberta-large)


@dataclass
class BertScoreConfig:
    """ANAH's BERTScore models: bert-base-chinese (zh) and roberta-large (en), as local paths."""
    zh: BertScoreModel = field(default_factory=lambda: BertScoreModel(None, 8))
    en: BertScoreModel = field(default_factory=lambda: BertScoreModel(None, 17))


@dataclass
class EvalConfig:
    method: EvalMethod = EvalMethod.annotator  # annotator (model.name_or_path / checkpoint) | rag | nli | grounding
    backend: Backend = Backend.hf         # generative decoding: hf (generate, batched) | vllm (gpu extra) |
                                          # openai (an OpenAI-compatible endpoint: eval.judge)
    vllm: VllmConfig = field(default_factory=VllmConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    rag: RagConfig = field(default_factory=RagConfig)
    nli: NliConfig = field(default_factory=NliConfig)
    grounding: GroundingConfig = field(default_factory=GroundingConfig)
    bertscore: BertScoreConfig = field(default_factory=BertScoreConfig)   # anah scorer only
    enabled: bool = True
    every_stage: bool = False             # also evaluate each stage's export (eval/stages/<i>-<stage>/)
    buckets: list[str] = field(default_factory=lambda: ["S", "M", "L"])
    max_per_bucket: int | None = None  # cap per bucket, taken balanced from hallucinated and faithful
    threshold_by: str | None = None       # a record field (meta.task_type): a binary head's threshold chosen per
                                          # value on the validation split, where the value has enough records
    threshold_for: ThresholdFor = ThresholdFor.balanced_accuracy   # what a threshold chosen on the validation
                                          # split maximises: balanced_accuracy | f1 (of the hallucinated class,
                                          # response level: the metric RAGTruth reports per task type)
    max_new_tokens: int = 256
    batch_size: int = 8                   # prompts per batch: greedy decoding batches prompts of equal length
                                          # only (no padding mask), head inference pads without a mask
    batch_tokens: int = 16384             # and at most this many tokens per batch (rows x longest): at 16k
                                          # and 32k one prompt at a time, so evaluation needs no more memory
                                          # than a training step at the same length
    export: str | None = None             # eval.method=grounding: the fitted annotator written there as an export that
                                          # eval.annotate applies (with data.folds: fitted again on every record)
    export_only: bool = False             # with data.folds and eval.export: skip the folds (an earlier launch measured
                                          # the recipe) and only fit on every record; the card carries the pooled
                                          # report where output_dir still holds it
    padded_batches: bool = False          # greedy decoding: batch prompts of any length, left-padded with an attention
                                          # mask (short prompts on a GPU: a judge over a benchmark); off, it batches
                                          # equal lengths only, whose answers are exactly one-at-a-time decoding's


@dataclass
class SlurmConfig:
    """`python slurm/submit.py`: the sbatch side of a run. Everything about the run itself stays in
    the experiment's own keys (output_dir, parallel, ...), never as an sbatch flag."""
    mode: SlurmMode = SlurmMode.train     # train (torchrun on every node) | eval (job array)
    nodes: int = 1
    gpus_per_node: int = 8                # GPUs asked for, and torchrun processes per node; 0: a CPU job
    procs_per_node: int | None = None  # CPU jobs: processes per node (default 1)
    threads_per_rank: int | None = None   # OMP_NUM_THREADS of each rank; None: 8 with optimizer offload (DeepSpeed's
                                          # CPU Adam steps in them), else 2
    cpus_per_task: int | None = None   # CPUs of the one task per node; None: processes per node x threads_per_rank
    mem: str | None = None             # per node, e.g. 500G; None: train: the memory plan's host memory per node
                                          # with a margin (python -m train.tools.plan); eval: the partition's default
    time: str = "24:00:00"
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    signal_seconds: int = 300             # warn this long before the limit: checkpoint and requeue
    rdzv_port: int = 29500                # c10d rendezvous port on the first node
    max_restarts: int = 1                 # torchrun restarts every rank this often when one dies (resume=auto)
    setup: list[str] = field(default_factory=list)        # shell lines first (module load, conda activate)
    checkpoints: list[str] = field(default_factory=list)  # eval: one array task per checkpoint x bucket
    dry_run: bool = False                 # print the script instead of submitting it


@dataclass
class PlanConfig:
    """python -m train.tools.plan: the GPU memory plan (also checked by the trainer on GPUs)."""
    gpu: Gpu | None = None             # h20 | a800 | a100-40 | a100-80 | h100 | h800 | h200
    gpu_mem_gb: float | None = None    # instead of a known GPU
    world_size: int | None = None      # default the SLURM job's: slurm.nodes x processes per node
    max_over: float = 1.25                # the trainer refuses a run whose plan is this far over


@dataclass
class SFTConfig:
    exp_name: str = "sft"
    output_dir: str = "outputs/${exp_name}/${now:%Y-%m-%d_%H-%M-%S}"
    resume: Resume = Resume.none          # none | auto
    checkpoint: str | None = None      # eval/run.py: the model to evaluate (default model.name_or_path)
    model: ModelConfig = field(default_factory=ModelConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    data: DataConfig = field(default_factory=DataConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    deepspeed: DeepSpeedConfig = field(default_factory=DeepSpeedConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    plan: PlanConfig = field(default_factory=PlanConfig)


@dataclass
class ScoreConfig:
    task: Scorer = MISSING         # longnovel | anah | binary | spans | uhgeval
    gold: str = MISSING            # JSONL records of the shared schema
    predictions: str = MISSING     # JSONL {"id", "output"} or {"id", "label"} / {"id", "probs"}
    output_dir: str = MISSING
    plots: bool = True
    bertscore: BertScoreConfig = field(default_factory=BertScoreConfig)   # anah only


@dataclass
class AnnotateConfig:
    """`python -m eval.annotate`: label anyone's outputs with an exported annotator, run in process or
    served (`backend=openai`: the export says how to prompt and read, the endpoint answers)."""
    model: str = MISSING           # an export directory (<run>/checkpoints/<i>-<stage>/hf) with annotator.json
    input: str = MISSING           # JSONL rows {"id"?, "source" | "documents", "response", "question"?}
    output: str = MISSING          # JSONL, one row per input row; an existing file is continued
    backend: Backend = Backend.hf  # generative decoding: hf | vllm (gpu extra) | openai (a served model: judge.*)
    judge: JudgeConfig = field(default_factory=JudgeConfig)   # backend=openai: the endpoint, as eval.judge
    batch_size: int = 8            # prompts per inference batch (as eval.batch_size)
    batch_tokens: int = 16384      # and at most this many tokens per batch (as eval.batch_tokens)
    dtype: Dtype = Dtype.auto      # as model.dtype: auto is fp32 on a CPU (the same on every CPU); bf16_if_native is
                                   # faster where the CPU computes bf16 (AVX512-BF16, AMX), its outputs that CPU's
    rows_per_write: int = 32       # rows annotated, then written, at a time
    progress: bool = True


def register_configs() -> None:
    ConfigStore.instance().store(name="sft_schema", node=SFTConfig)
    ConfigStore.instance().store(name="score_schema", node=ScoreConfig)
    ConfigStore.instance().store(name="annotate_schema", node=AnnotateConfig)


register_configs()


def stage_sp_size(parallel: ParallelConfig, stage: StageConfig | None) -> int:
    """A stage's sequence-parallel degree: its own `sp_size`, else `parallel.sp_size` (the one
    reader of the configured degrees; `train.parallel_dims` validates them)."""
    return stage.sp_size if stage is not None and stage.sp_size is not None else parallel.sp_size


def typed(composed: Any) -> Any:
    """The composed config as the schema's dataclasses (`SFTConfig`, `ScoreConfig`,
    `AnnotateConfig`), every interpolation resolved: each entry point converts once and hands on
    these, never Hydra's `DictConfig`."""
    from omegaconf import OmegaConf

    return OmegaConf.to_object(composed)


def with_changes(config: Any, changes: dict) -> Any:
    """A new config with `changes` ({"data": {"folds": 0}, "output_dir": ...}) applied section by
    section; `config` itself is left as it was (a built config is never mutated)."""
    import dataclasses

    fields = {}
    for key, value in changes.items():
        if not hasattr(config, key):
            raise KeyError(f"{type(config).__name__} has no key {key!r}")
        current = getattr(config, key)
        nested = isinstance(value, dict) and dataclasses.is_dataclass(current)
        fields[key] = with_changes(current, value) if nested else value
    return dataclasses.replace(config, **fields)


def to_container(cfg: Any) -> dict:
    """Plain dicts and lists (enums as their names): what `config.yaml` and W&B record."""
    import dataclasses

    from omegaconf import OmegaConf

    node = OmegaConf.structured(cfg) if dataclasses.is_dataclass(cfg) else cfg
    return OmegaConf.to_container(node, resolve=True, enum_to_str=True)


def to_yaml(cfg: Any) -> str:
    from omegaconf import OmegaConf

    return OmegaConf.to_yaml(to_container(cfg))
