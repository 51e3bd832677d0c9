"""The closed sets of the public config keys, one `Enum` each (their one home).

The structured schemas beside it (`configs/schema.py`) type these keys with them, so
OmegaConf rejects a misspelt value when the config is composed and names the allowed ones
(`task.kind=generatve` fails before anything runs). Members are strings: `cfg.task.kind ==
"generative"`, f-strings, JSON and dictionary keys see the plain value. The registries keyed by
a set (scorers, predictors, heads, data sources, ring kernels) are checked against it in tests.
"""
from __future__ import annotations

from enum import Enum


class Choice(str, Enum):
    """A closed set of strings whose members print, format and compare as their value."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    def __repr__(self) -> str:
        return repr(self.value)


def _choice(name: str, values: str) -> type[Choice]:
    return Choice(name, {v: v for v in values.split()})


TaskKind = _choice("TaskKind", "generative discriminative spans")
Head = _choice("Head", "binary anah faithfulness")
Scorer = _choice("Scorer", "longnovel anah binary spans uhgeval summedits")
DataSource = _choice("DataSource", "embedded anah_embedded records longnovel_released mixture")
SpMode = _choice("SpMode", "zigzag zigzag_varlen")
RingImpl = _choice("RingImpl", "ring ring_flash_attn")
RingKernel = _choice("RingKernel", "torch flash_attn")
Scheduler = _choice("Scheduler", "cosine linear constant")
LoggerMode = _choice("LoggerMode", "auto online offline disabled")
EvidenceUnit = _choice("EvidenceUnit", "sentence clause")
EncoderHead = _choice("EncoderHead", "unit token")
TokenSpans = _choice("TokenSpans", "whole_units in_marked_units anywhere")
EvalMethod = _choice("EvalMethod", "annotator rag nli grounding")
Backend = _choice("Backend", "hf vllm openai")
ThresholdFor = _choice("ThresholdFor", "balanced_accuracy f1")
NliMethod = _choice("NliMethod", "summac_zs halumap")
NliScore = _choice("NliScore", "contradiction entailment")
SlurmMode = _choice("SlurmMode", "train eval")
Resume = _choice("Resume", "none auto")
Gpu = _choice("Gpu", "h20 a800 a100-40 a100-80 a100 h100 h800 h200")
CorpusLanguage = _choice("CorpusLanguage", "zh en")
Dtype = _choice("Dtype", "auto bf16_if_native float32 fp32 bfloat16 bf16 float16")
