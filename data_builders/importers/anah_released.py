"""Importer for the released ANAH dataset (Hugging Face `opencompass/anah`: event.jsonl,
location.jsonl, person.jsonl, thing.jsonl).

A row is a topic: `name`, `documents`, `selected_questions`, the answers of two models
(`GPT3.5_answers_D`, `InternLM_answers`, one per question) and their human annotations
(`human_GPT3.5_answers_D_ann`, `human_InternLM_answers_ann`: per answer, one tagged string per
sentence such as `<要点>...<幻觉>无<参考>...<改正>...`), and `language`. Every annotated sentence
becomes one record of the shared schema.

Splits follow section 4.1: the test set is made of an unseen-topic group (whole topics held
out) and an unseen-question group (topics seen in training, questions held out);
`meta.test_group` says which. Reference windows (`meta.window`) are retrieved per sentence;
windows of unverifiable training sentences are widened sixfold as in the annotation pipeline
(section 2.4). Test windows are never widened: the gold type is unknown at inference time.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from data_builders.importers.registry import Splits, importer
from data_builders.model_inputs.anah_prompts import WINDOW_TOKENS, SourceIndex
from data_builders.model_inputs.anah_tags import parse_anah_annotation
from data_builders.records import RecordError, iter_jsonl, validate_record
from data_builders.sentences import split_sentences

ANSWER_FIELDS = {"GPT3.5_answers_D": ("human_GPT3.5_answers_D_ann", "gpt35"),
                 "InternLM_answers": ("human_InternLM_answers_ann", "internlm")}
REQUIRED = ("name", "documents", "selected_questions", "language")
UNVERIFIABLE_WIDENING = 6


@dataclass
class AnahImportReport:
    topics: int = 0
    sentences: int = 0
    skipped: list[str] = field(default_factory=list)   # "file:line q<i> <model> s<k>: why"

    def summary(self) -> str:
        return (f"{self.topics} topics, {self.sentences} annotated sentences, "
                f"{len(self.skipped)} skipped (unreadable annotations)")


def _fraction(*keys) -> float:
    digest = hashlib.sha1("\x1f".join(map(str, keys)).encode()).hexdigest()
    return int(digest[:12], 16) / 16 ** 12


def held_out_group(name: str, qi: int, n_questions: int, test_topics: float, test_questions: float,
               seed: int) -> str | None:
    """'unseen_topic', 'unseen_question' or None (train), deterministic in (name, question, seed).
    A topic keeps at least one question in training unless the whole topic is held out."""
    if _fraction(seed, "topic", name) < test_topics:
        return "unseen_topic"
    if n_questions < 2:
        return None
    kept = [q for q in range(n_questions) if _fraction(seed, "question", name, q) >= test_questions]
    if not kept:
        kept = [max(range(n_questions), key=lambda q: _fraction(seed, "question", name, q))]
    return None if qi in kept else "unseen_question"


def _check_row(row, path: str, line: int) -> None:
    if not isinstance(row, dict):
        raise RecordError(f"expected a topic object, found {type(row).__name__}", path, line)
    for name in REQUIRED:
        if name not in row:
            raise RecordError("missing required field", path, line, name)
    if not isinstance(row["documents"], list) or not all(isinstance(d, str) for d in row["documents"]):
        raise RecordError("expected a list of str", path, line, "documents")
    n = len(row["selected_questions"])
    for answers, (anns, _) in ANSWER_FIELDS.items():
        if answers in row and (anns not in row or len(row[answers]) != n or len(row[anns]) != n):
            raise RecordError(f"expected {n} answers and {n} annotation lists (one per selected question), "
                              f"found {len(row[answers])} and {len(row.get(anns) or [])}", path, line, anns)


def _sentence_texts(answer: str, anns: list, language: str) -> list[str | None]:
    """The sentence each annotation is about: its <要点> if given, else the answer's k-th sentence."""
    split = split_sentences(answer, language)
    out = []
    for k, ann in enumerate(anns):
        parsed = parse_anah_annotation(ann) if isinstance(ann, str) else None
        if parsed and parsed.key_point:
            out.append(parsed.key_point)
        else:
            out.append(split[k] if len(split) == len(anns) else None)
    return out


def _topic_records(row: dict, where: tuple[str, int], groups: dict, windows: bool, ranker,
                   report: AnahImportReport) -> list[dict]:
    path, line = where
    lang = "zh" if str(row["language"]).lower().startswith("zh") else "en"
    stem = f"anah-{Path(path).stem}-{line}"
    index = SourceIndex("\n".join(row["documents"]), lang, ranker) if windows else None
    out = []
    for answers_field, (anns_field, model) in ANSWER_FIELDS.items():
        for qi, (question, answer, anns) in enumerate(zip(row["selected_questions"], row.get(answers_field) or [],
                                                          row.get(anns_field) or [])):
            for k, (ann, sentence) in enumerate(zip(anns, _sentence_texts(answer, anns, lang))):
                parsed = parse_anah_annotation(ann) if isinstance(ann, str) else None
                if parsed is None or not sentence:
                    why = "no hallucination type in the annotation" if parsed is None else "sentence not found"
                    report.skipped.append(f"{path}:{line} q{qi} {model} s{k}: {why}")
                    continue
                group = groups[qi]
                meta = {"name": row["name"], "model": model, "question_index": qi, "sentence_index": k,
                        "answer": answer, "test_group": group, "annotation": ann}
                if index is not None:
                    wide = parsed.type == "unverifiable" and group is None
                    factor = UNVERIFIABLE_WIDENING if wide else 1
                    meta["window"] = index.window(sentence, WINDOW_TOKENS[lang] * factor)
                rec = {"id": f"{stem}-q{qi}-{model}-s{k}", "task": "qa", "language": lang,
                       "documents": list(row["documents"]), "question": question, "response": sentence,
                       "type": parsed.type, "reference": parsed.reference, "correction": parsed.correction,
                       "label": int(parsed.type in ("contradictory", "unverifiable")), "meta": meta}
                out.append(validate_record(rec, path, line))
    return out


def import_anah(paths: list[str | Path], test_topics: float = 0.1, test_questions: float = 0.1, seed: int = 0,
                windows: bool = True, ranker=None, max_skip_fraction: float = 0.02,
                report: AnahImportReport | None = None) -> dict[str, list[dict]]:
    """Sentence records per split ('train', 'test') from released topic files."""
    report = report if report is not None else AnahImportReport()
    out: dict[str, list[dict]] = {"train": [], "test": []}
    for path in map(str, paths):
        for line, row in iter_jsonl(path):
            _check_row(row, path, line)
            n = len(row["selected_questions"])
            groups = {qi: held_out_group(row["name"], qi, n, test_topics, test_questions, seed) for qi in range(n)}
            for rec in _topic_records(row, (path, line), groups, windows, ranker, report):
                out["test" if rec["meta"]["test_group"] else "train"].append(rec)
            report.topics += 1
    report.sentences = sum(map(len, out.values()))
    total = report.sentences + len(report.skipped)
    if total and len(report.skipped) / total > max_skip_fraction:
        raise RecordError(f"{len(report.skipped)} of {total} annotations could not be read (above "
                          f"max_skip_fraction={max_skip_fraction}); first: {report.skipped[:3]}", str(paths[0]))
    return out


def _arguments(parser) -> None:
    parser.add_argument("--test-topics", type=float, default=0.1, help="share of topics held out")
    parser.add_argument("--test-questions", type=float, default=0.1,
                        help="share of questions held out of the remaining topics")
    parser.add_argument("--ranker", default="none",
                        help="'minilm' (bundled MiniLM), a sentence-transformers path, or 'none' (BM25 only)")


@importer("anah", "ANAH's released topic files (person.jsonl, event.jsonl, ...), split by topic and question",
          _arguments)
def convert_anah(args) -> tuple[Splits, str]:
    from data_builders.model_inputs.retrieval import EmbeddingRanker

    report = AnahImportReport()
    ranker = EmbeddingRanker(args.ranker) if args.ranker != "none" else None
    out = import_anah(args.inputs, args.test_topics, args.test_questions, args.seed, ranker=ranker, report=report)
    groups = {g: sum(r["meta"]["test_group"] == g for r in out["test"]) for g in ("unseen_topic", "unseen_question")}
    return out, report.summary() + f"; test groups {groups}" + "".join(f"\n  skipped {s}" for s in report.skipped)
