"""What a causal language model expects of a response with and without its source
(`eval.grounding.lm`): the log-probability of each response token given the source, and its gain over
the same token without it.

A faithful response copies and paraphrases its source, so reading the source makes its tokens more
likely; a token the source contradicts or never mentions gains little or loses. Each unit (sentence or
clause) of the response gets the smallest and the mean gain of its tokens, and the smallest and mean
log-probability given the source, beside the grounding annotator's word-overlap features. A forward
pass over a long source is the cost (a 135M decoder reads about 500 tokens/s on 2 CPU cores), so each
record's token log-probabilities are appended to a cache on disk, one JSONL file per model and prompt,
and a stopped run continues from it.
"""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data_builders.common.cache_dir import cache_root
from data_builders.records import read_jsonl_to_append

LM_FEATURES = ("min_gain", "mean_gain", "min_logprob", "mean_logprob")
GIVEN_SOURCE = "{source}\n\nResponse:"      # the response follows the source ...
WITHOUT_SOURCE = "Response:"                # ... or nothing
CACHE_VERSION = 1                           # bump when the prompts or what is stored change


@dataclass
class TokenEvidence:
    offsets: list[tuple[int, int]]    # each response token's characters in the response
    given_source: np.ndarray          # log p(token | source, earlier tokens)
    without_source: np.ndarray        # log p(token | earlier tokens)

    def unit_features(self, span: tuple[int, int]) -> list[float]:
        """LM_FEATURES of the tokens that overlap `span` (zeros where none does)."""
        inside = [i for i, (a, b) in enumerate(self.offsets) if a < span[1] and b > span[0]]
        if not inside:
            return [0.0] * len(LM_FEATURES)
        given = self.given_source[inside]
        gain = given - self.without_source[inside]
        return [float(gain.min()), float(gain.mean()), float(given.min()), float(given.mean())]


class LmReader:
    """Token evidence for records from one causal LM (`embedded:smollm2-135m` or a local directory), read
    once per record and process, and kept on disk under `cache_dir` (default: the user's cache)."""

    def __init__(self, name_or_path: str, max_source_tokens: int, cache_dir: str | None = None):
        self.name, self.max_source_tokens = name_or_path, max_source_tokens
        root = Path(cache_dir) if cache_dir else cache_root() / "lm-logprobs"
        root.mkdir(parents=True, exist_ok=True)
        settings = json.dumps([name_or_path, max_source_tokens, GIVEN_SOURCE, WITHOUT_SOURCE, CACHE_VERSION])
        self.cache_path = root / f"{hashlib.sha256(settings.encode()).hexdigest()[:16]}.jsonl"
        self.cache = {row["key"]: row for row in read_jsonl_to_append(self.cache_path)}
        self.model = self.tokenizer = None

    def read(self, rec: dict) -> TokenEvidence:
        key = hashlib.sha256(json.dumps([rec["source"], rec["response"]]).encode()).hexdigest()
        if key not in self.cache:
            row = {"key": key, **self._score(rec["source"], rec["response"])}
            with open(self.cache_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
            self.cache[key] = row
        row = self.cache[key]
        return TokenEvidence([tuple(o) for o in row["offsets"]], np.array(row["given_source"]),
                             np.array(row["without_source"]))

    def _load(self) -> None:
        from transformers import AutoTokenizer

        from models.builders import load_causal_lm, resolve_model_path

        path = resolve_model_path(self.name, "eval.grounding.lm")
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = load_causal_lm(path, "float32").eval()

    def _score(self, source: str, response: str) -> dict:
        if self.model is None:
            self._load()
        tok = self.tokenizer
        answer = tok(" " + response, add_special_tokens=False, return_offsets_mapping=True)
        source_ids = tok(source, add_special_tokens=False)["input_ids"][:self.max_source_tokens]
        given_prefix = tok(GIVEN_SOURCE.format(source=tok.decode(source_ids)), add_special_tokens=False)["input_ids"]
        without_prefix = tok(WITHOUT_SOURCE, add_special_tokens=False)["input_ids"]
        ids = answer["input_ids"]
        return {"offsets": [[max(0, a - 1), max(0, b - 1)] for a, b in answer["offset_mapping"]],   # the " " added
                "given_source": self._logprobs(given_prefix, ids),
                "without_source": self._logprobs(without_prefix, ids)}

    def _logprobs(self, prefix: list[int], ids: list[int]) -> list[float]:
        import torch

        if not ids:                 # an empty response: no token to read
            return []
        with torch.no_grad():
            logits = self.model(torch.tensor([prefix + ids])).logits[0, len(prefix) - 1:-1].float()
        picked = torch.log_softmax(logits, -1).gather(1, torch.tensor(ids)[:, None])[:, 0]
        return [round(float(x), 4) for x in picked]


@functools.cache
def lm_reader(name_or_path: str, max_source_tokens: int, cache_dir: str | None) -> LmReader:
    """One reader (one loaded model, one cache) per LM, source budget and cache in a process: folds share it."""
    return LmReader(name_or_path, max_source_tokens, cache_dir)
