"""Training-free NLI-matrix baselines: SummaC zero-shot (Laban et al., 2022) and HaluMap (seed 003).

An NLI model scores every (source segment m, output segment n) pair, giving a matrix
N[M, N, 3] of (entailment, neutral, contradiction) probabilities. HaluMap optionally
calibrates it with the source's self-NLI matrix (each source segment's mean scores against
the other source segments are its background noise, subtracted row-wise), then pools:
the first operator over source segments, the second over output segments.

Scores are "higher = more hallucinated"; the decision threshold is chosen on a validation
split (eval/thresholds.py), never on the test split.
"""
from __future__ import annotations

import numpy as np

from configs.schema import NliConfig
from data_builders.model_inputs.prompts import article_of
from data_builders.sentences import split_sentences

ENT, NEU, CON = 0, 1, 2
OPS = {"max": np.max, "mean": np.mean, "min": np.min}
METHODS = ("summac_zs", "halumap")


class NLIModel:
    """Any Hugging Face sequence-classification NLI model; label order read from its config."""

    def __init__(self, path: str, batch_size: int = 16, max_length: int = 512):
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForSequenceClassification.from_pretrained(path).eval()
        self.order = self._label_order(self.model.config.id2label, path)
        self.batch_size, self.max_length, self._torch = batch_size, max_length, torch

    @staticmethod
    def _label_order(id2label: dict, path: str) -> list[int]:
        names = {str(v).lower(): int(k) for k, v in id2label.items()}
        order = []
        for want in ("entail", "neutral", "contradict"):
            hit = [i for name, i in names.items() if name.startswith(want)]
            if not hit:
                raise ValueError(f"NLI model {path}: id2label {dict(id2label)} has no '{want}...' label; "
                                 "expected entailment / neutral / contradiction")
            order.append(hit[0])
        return order

    def probs(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """[len, 3] probabilities in (entailment, neutral, contradiction) order."""
        out = []
        with self._torch.no_grad():
            for i in range(0, len(premises), self.batch_size):
                enc = self.tokenizer(premises[i:i + self.batch_size], hypotheses[i:i + self.batch_size],
                                     truncation=True, max_length=self.max_length, padding=True, return_tensors="pt")
                p = self.model(**enc).logits.float().softmax(-1)
                out.append(p[:, self.order].numpy())
        return np.concatenate(out) if out else np.zeros((0, 3))


def segments(text: str, language: str, block_chars: int = 0) -> list[str]:
    """Sentences, or consecutive sentences packed into blocks of about `block_chars` characters."""
    sents = split_sentences(text, language)
    if block_chars <= 0:
        return sents
    blocks, cur = [], ""
    for s in sents:
        if cur and len(cur) + len(s) > block_chars:
            blocks.append(cur)
            cur = ""
        cur += s if language == "zh" else (" " + s if cur else s)
    return blocks + ([cur] if cur else [])


def nli_matrix(model: NLIModel, source: list[str], output: list[str]) -> np.ndarray:
    pairs = [(d, t) for d in source for t in output]
    p = model.probs([a for a, _ in pairs], [b for _, b in pairs])
    return p.reshape(len(source), len(output), 3)


def self_background(model: NLIModel, source: list[str]) -> np.ndarray:
    """[M, 3]: each source segment's mean scores against the other source segments."""
    if len(source) < 2:
        return np.zeros((len(source), 3))
    full = nli_matrix(model, source, source)
    off = ~np.eye(len(source), dtype=bool)
    return np.stack([full[m][off[m]].mean(0) for m in range(len(source))])


def pool(matrix: np.ndarray, first: str, second: str) -> float:
    """`second` over output segments of `first` over source segments (axis 0)."""
    return float(OPS[second](OPS[first](matrix, axis=0)))


def hallucination_score(matrix: np.ndarray, method: str, score: str = "contradiction") -> float:
    """summac_zs: -mean_n max_m (ent - con); halumap: max_n max_m con, or -mean_n max_m ent."""
    if method == "summac_zs":
        return -pool(matrix[..., ENT] - matrix[..., CON], "max", "mean")
    if method == "halumap" and score == "contradiction":
        return pool(matrix[..., CON], "max", "max")
    if method == "halumap" and score == "entailment":
        return -pool(matrix[..., ENT], "max", "mean")
    raise ValueError(f"eval.nli.method / eval.nli.score: expected one of {list(METHODS)} / contradiction | "
                     f"entailment, found {method!r} / {score!r}")


def score_record(model: NLIModel, record: dict, nli: NliConfig) -> dict:
    """The record's hallucination score and the map behind it (for reports)."""
    lang = record.get("language", "en")
    source = segments(article_of(record), lang, nli.block_chars)
    output = segments(record["response"], lang, 0) or [record["response"]]
    if not source:
        raise ValueError(f"record {record['id']!r}: empty source, nothing to check the output against")
    matrix = nli_matrix(model, source, output)
    if nli.method == "halumap" and nli.calibrate:
        matrix = matrix - self_background(model, source)[:, None, :]
    return {"score": hallucination_score(matrix, nli.method, nli.score),
            "per_segment": matrix[..., CON].max(0).round(4).tolist()}
