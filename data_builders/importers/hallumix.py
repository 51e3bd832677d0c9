"""HalluMix (seed 001, section 2): the construction transforms and an importer for the
released rows (`documents`, `answer`, `hallucination_label`, `source`).

An example is a dict {documents: [str], answer: str, label: 0|1, source: str}.
"""
from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path

from data_builders.importers.registry import Splits, importer, one_split
from data_builders.records import RecordError, iter_jsonl, validate_record
from data_builders.sentences import split_sentences

ENTAILMENT = {"entailment", "entailed", 0}


def nli_example(premise: str, hypothesis: str, nli_label, source: str) -> dict:
    """NLI relabelling: entailment is faithful; neutral, contradiction and not-entailment are hallucinated."""
    return {"documents": [premise], "answer": hypothesis, "label": int(nli_label not in ENTAILMENT), "source": source}


def mismatched(examples: list[dict], rng: random.Random) -> list[dict]:
    """Each answer paired with the documents of another example (summary / QA-context mismatch): label 1."""
    if len(examples) < 2:
        raise ValueError("mismatching needs at least two examples")
    out = []
    for i, ex in enumerate(examples):
        j = rng.choice([k for k in range(len(examples)) if k != i])
        out.append({**ex, "documents": examples[j]["documents"], "label": 1})
    return out


def swap_typed_answer(example: dict, same_type_answers: list[str], rng: random.Random) -> dict | None:
    """DROP-style perturbation: the answer replaced by another answer of the same type from the same
    context (label 1); None when no different candidate exists."""
    candidates = [a for a in same_type_answers if a != example["answer"]]
    return {**example, "answer": rng.choice(candidates), "label": 1} if candidates else None


def chunk_sentences(text: str, language: str, target_chars: int = 600) -> list[str]:
    """Chunks of whole sentences of about `target_chars` each; no sentence is ever cut."""
    chunks, current = [], ""
    joiner = "" if language.startswith("zh") else " "
    for sentence in split_sentences(text, language):
        if current and len(current) + len(sentence) > target_chars:
            chunks.append(current)
            current = ""
        current = f"{current}{joiner}{sentence}" if current else sentence
    return chunks + ([current] if current else [])


def add_distractors(example: dict, pool: list[str], rng: random.Random, n: int = 10) -> dict:
    """Ten unrelated chunks for faithful examples only (they cannot add support to a hallucination),
    then the chunks shuffled."""
    if example["label"] != 0:
        return example
    own = set(example["documents"])
    extra = rng.sample([c for c in pool if c not in own], n)
    documents = example["documents"] + extra
    rng.shuffle(documents)
    return {**example, "documents": documents}


def balanced_sample(examples: list[dict], per_source: int, rng: random.Random) -> list[dict]:
    """Stratified sampling: per source, up to `per_source` examples split evenly between the labels."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for ex in examples:
        groups[(ex["source"], ex["label"])].append(ex)
    out = []
    for source in sorted({s for s, _ in groups}):
        take = min(per_source // 2, *(len(groups[(source, label)]) for label in (0, 1)))
        for label in (0, 1):
            out += rng.sample(groups[(source, label)], take)
    return out


def to_record(example: dict, rid: str, language: str = "en") -> dict:
    return validate_record({"id": rid, "task": "qa", "language": language, "documents": list(example["documents"]),
                            "response": example["answer"], "label": example["label"],
                            "meta": {"source": example["source"]}})


def import_hallumix(path: str | Path) -> list[dict]:
    """Records from the released HalluMix rows (JSONL)."""
    path, records = Path(path), []
    for line, row in iter_jsonl(path):
        for name in ("documents", "answer", "hallucination_label", "source"):
            if name not in row:
                raise RecordError("missing required field", str(path), line, name)
        if row["hallucination_label"] not in (0, 1):
            raise RecordError(f"expected 0 or 1, found {row['hallucination_label']!r}", str(path), line,
                              "hallucination_label")
        docs = row["documents"] if isinstance(row["documents"], list) else None
        if docs is None or not all(isinstance(d, str) for d in docs):
            raise RecordError("expected a list of str", str(path), line, "documents")
        example = {"documents": docs, "answer": row["answer"], "label": row["hallucination_label"],
                   "source": str(row["source"])}
        try:
            records.append(to_record(example, str(row.get("id", f"hallumix-{line}"))))
        except RecordError as e:
            raise RecordError(str(e).split(": ", 1)[-1], str(path), line, e.field) from None
    return records


@importer("hallumix", "HalluMix's released JSONL")
def convert_hallumix(args) -> tuple[Splits, str]:
    return one_split([r for p in args.inputs for r in import_hallumix(p)], args.split)
