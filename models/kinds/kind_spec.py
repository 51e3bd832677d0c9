"""What every kind of annotator provides (`Kind`: typed methods, as torchtitan's `TrainSpec`), and the
helpers two kinds share."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from data_builders.model_inputs.collate import prompt_ids
from data_builders.model_inputs.pairs import PairTooLong, best_chunk, pair_inputs, uses_pairs, whole_pair

if TYPE_CHECKING:
    import torch
    from torch import nn
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from configs.schema import TaskConfig
    from models.export_spec import AnnotatorSpec

    Task = TaskConfig | AnnotatorSpec   # a training run's task settings, or an export's spec (the same fields)

Record = dict[str, Any]        # a record (data_builders/records.py): id, source, response, label, spans, ...
Sample = dict[str, Any]        # one training sample: token ids and what it is trained to give
ModelInput = dict[str, Any]    # what judges a record: a prompt's ids, or one evidence chunk's (evidence, response) pair
Batch = dict[str, Any]         # collated tensors of samples
Result = dict[str, Any]        # what the model says of one input: probabilities, token probabilities, a completion


class Kind(ABC):
    """A kind of annotator (`task.kind`): every part of the toolkit that differs by kind asks it."""

    name: ClassVar[str]
    generates: ClassVar[bool]          # an LM head writes the answer (else a classification head reads the input):
                                       # packing, response_lm, vLLM and the logits term of the plan
    lora_task: ClassVar[str]           # peft's task type of its LoRA adapters
    token_probs: ClassVar[bool] = False   # its rows carry a probability per response token (spans at a threshold)

    @abstractmethod
    def encode(self, rec: Record, tok: PreTrainedTokenizerBase, task: Task) -> Sample:
        """A record as a training sample."""

    @abstractmethod
    def inputs(self, rec: Record, tok: PreTrainedTokenizerBase, task: Task) -> list[ModelInput]:
        """The model inputs that judge a record (an encoder: one per evidence chunk)."""

    @abstractmethod
    def collate(self, samples: list[Sample], pad_id: int) -> Batch:
        """Samples as one batch."""

    @abstractmethod
    def load(self, path: str, head: str, dtype: str, attn_implementation: str,
             yarn_factor: float | None) -> PreTrainedModel:
        """The Hugging Face model at `path`, with this kind's head."""

    @abstractmethod
    def for_inference(self, model: nn.Module) -> nn.Module:
        """The module that predicts, around a Hugging Face model (LoRA-wrapped or not)."""

    @abstractmethod
    def for_training(self, module: nn.Module, chunk_tokens: int) -> nn.Module:
        """The module that is trained (`trainer.loss_chunk_tokens`: a generative loss in chunks)."""

    @abstractmethod
    def loss_sum(self, model: nn.Module, batch: Batch, task: Task, sp_rank: int, **sp: Any) -> torch.Tensor:
        """The batch's summed loss (an engine or a module), with the sequence-parallel keywords."""

    @abstractmethod
    def targets(self, batch: Batch, n_samples: int, sp_rank: int) -> int:
        """How many targets this rank's batch counts (the loss is their mean over every rank)."""

    @abstractmethod
    def predict(self, model: nn.Module, tok: PreTrainedTokenizerBase, inputs: list[ModelInput],
                max_new_tokens: int, padded: bool = False) -> list[Result]:
        """A result per input (`padded`: a generative batch of unequal lengths, left-padded)."""

    @abstractmethod
    def pool(self, results: list[Result]) -> dict[str, Any]:
        """The results of one record's inputs as its prediction row's fields."""

    @abstractmethod
    def labels(self, task: Task) -> tuple[str, ...]:
        """The names of what it tells apart."""

    @abstractmethod
    def thresholded(self, task: Task) -> bool:
        """Whether its rows carry a hallucination probability to threshold."""

    @abstractmethod
    def card_title(self, task: Task) -> str:
        """How a model card names it."""


def prompt_inputs(rec: Record, tok: PreTrainedTokenizerBase, task: Task) -> list[ModelInput]:
    """A decoder reads one chat prompt; an encoder reads its (evidence, response) chunks."""
    return pair_inputs(rec, tok) if uses_pairs(tok) else [{"input_ids": prompt_ids(rec, tok, task.template)}]


def training_pair(rec: Record, tok: PreTrainedTokenizerBase) -> ModelInput:
    """An encoder's training input: the evidence chunk most likely to hold the evidence; a pair that
    cannot fit the window comes back whole (longer than the stage's max_seq_len: skipped and counted)."""
    try:
        return best_chunk(pair_inputs(rec, tok), rec)
    except PairTooLong:
        return whole_pair(rec, tok)
