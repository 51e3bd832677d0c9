"""Label anyone's outputs with a trained annotator, from its export alone.

    python -m eval.annotate model=EXPORT_DIR input=IN.jsonl output=OUT.jsonl
    python -m eval.annotate model=EXPORT_DIR input=IN.jsonl output=OUT.jsonl backend=openai \
        judge.base_url=http://127.0.0.1:8000/v1 judge.model=NAME      # the export served (transformers serve)

Input rows: `{"id"?, "source" | "documents", "response", "question"?}` (records of the schema are
accepted too; their labels are ignored). An export with per-group thresholds reads their field (`meta.task_type`),
a grounding export the task type (`meta.task_type`, else `task`): the command counts the rows that lack them.
One output row per input row, in input order:
`label` (`hallucinated` / `faithful`, or the ANAH type), `score` (a head's probability), `spans`
(the flagged sentences as `[start, end)` offsets into the response, in Python string indices,
with `text` and, where the annotator names one, `type`), a generative annotator's `correction`
and `reason`, and `unparseable: true` with the `raw` text when its answer cannot be read.

Rows are written as they are annotated; run it again with the same output to continue. Then a
summary of the whole file is printed and written beside it (`OUT.jsonl.summary.md`, with the score
histogram `OUT.jsonl.scores.png`: eval/reports/annotation_summary.py), and a page that shows every row
with its flagged spans highlighted (`OUT.jsonl.html`: eval/reports/annotation_page.py). The Python API is
`Annotator.load(EXPORT_DIR)`, then `.annotate(source, response)`, `.annotate_rows(rows)`, or, for a
RAG answer, `.predict(context=[passages], question=..., answer=..., output_format="spans" | "tokens")`.
Predictions go through `eval.predictors.AnnotatorPredictor`, the path of `eval/run.py` and of the
trainer's final evaluation.
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import hydra
from omegaconf import DictConfig

import configs.schema  # noqa: F401  (registers the schemas)
from configs.schema import AnnotateConfig, JudgeConfig, VllmConfig, typed
from data_builders.common.progress import progress, quiet_libraries
from data_builders.common.user_errors import reports_user_errors
from data_builders.model_inputs.anah_prompts import SourceIndex
from data_builders.model_inputs.collate import prompt_ids
from data_builders.model_inputs.pairs import uses_pairs
from data_builders.records import TASKS, RecordError, iter_jsonl, read_jsonl, read_jsonl_to_append
from eval.baselines.grounding import TASK_TYPE_FIELD, task_type
from eval.baselines.grounding_export import GROUNDING, GroundingAnnotator
from eval.predictors import AnnotatorPredictor, Inference
from eval.reports.annotation_page import write_annotated_page
from eval.reports.annotation_summary import write_summary
from eval.scorers.scoring import scorer
from eval.thresholds import DEFAULT, field_value, is_hallucinated
from models.builders import dtype_choice
from models.export_spec import AnnotatorSpec

OUTPUT_FORMATS = ("spans", "tokens")       # what Annotator.predict returns


@dataclass
class Annotator:
    spec: AnnotatorSpec
    predictor: AnnotatorPredictor | GroundingAnnotator

    @classmethod
    def load(cls, path: str | Path, backend: str = "hf", batch_size: int = 8, batch_tokens: int = 16384,
             judge: JudgeConfig | None = None, dtype: str = "auto") -> Annotator:
        """The annotator exported in `path` (`annotator.json` says how it reads its inputs); with
        backend="openai" its prompts go to the endpoint `judge` names (a served copy of it, say);
        `dtype` as `model.dtype` (auto: fp32 on a CPU)."""
        spec = AnnotatorSpec.load(path)
        if spec.method == GROUNDING:
            return cls(spec, GroundingAnnotator(path))
        inference = Inference(backend=backend, max_new_tokens=spec.max_new_tokens, batch_size=batch_size,
                              batch_tokens=batch_tokens, dtype=str(dtype), vllm=VllmConfig(), judge=judge)
        predictor = AnnotatorPredictor(spec, inference, str(path), progress=False)
        predictor.prepare({})
        return cls(spec, predictor)

    def annotate(self, source: str, response: str, question: str | None = None) -> dict:
        """One (source, response) pair; the same dict as an output row of the command."""
        row = {"source": source, "response": response, **({"question": question} if question else {})}
        return self.annotate_rows([row])[0]

    def predict(self, context: list[str] | str, answer: str, question: str | None = None,
                output_format: str = "spans") -> list[dict]:
        """A RAG answer checked against its retrieved passages (LettuceDetect's call shape).
        output_format="spans": the flagged spans, `{start, end, text}` offsets into `answer` (and
        `type` where the annotator names one), as in `annotate`'s row; "tokens": every answer token
        `{start, end, token, prob, pred}` with the head's hallucination probability, from a span
        (token) head only: a sentence- or response-level annotator has no per-token probability."""
        if output_format not in OUTPUT_FORMATS:
            raise ValueError(f"output_format={output_format!r}: expected one of {list(OUTPUT_FORMATS)}")
        if output_format == "tokens" and not self.predictor.kind.token_probs:
            raise ValueError(f"output_format='tokens' needs a span (token) head; this annotator is "
                             f"task.kind={self.spec.kind!r}: use output_format='spans'")
        documents = [context] if isinstance(context, str) else list(context)
        row = {"documents": documents, "response": answer, **({"question": question} if question else {})}
        (rec, pred), = self._predicted(self._records([row]))
        if output_format != "tokens":
            return self.output_row(rec, pred)["spans"]
        threshold = pred.get("threshold", DEFAULT)
        return [{"start": a, "end": b, "token": answer[a:b], "prob": p, "pred": int(is_hallucinated(p, threshold))}
                for a, b, p in pred["token_probs"]]

    def annotate_rows(self, rows: Iterable[dict]) -> list[dict]:
        """Output rows for input rows (checked as the command checks them)."""
        return self.annotate_records(self._records(rows))

    def _records(self, rows: Iterable[dict]) -> list[dict]:
        records = []
        for i, row in enumerate(rows):
            problem = row_problem(row)
            if problem:
                raise ValueError(f"row {i + 1}, field '{problem[1]}': {problem[0]}")
            records.append(self.record(row, f"row {i + 1}", f"r{i}"))
        return records

    def _predicted(self, records: list[dict]) -> list[tuple[dict, dict]]:
        return list(zip(records, self.predictor.rows(records, progress=False)))

    def annotate_records(self, records: list[dict]) -> list[dict]:
        """Output rows for records made by `record`, predicted together."""
        return [self.output_row(rec, pred) for rec, pred in self._predicted(records)]

    def record(self, row: dict, where: str, key: str) -> dict:
        """A schema record for one input row; `key` keeps rows apart whatever ids they carry."""
        source = row.get("source") or "\n".join(row.get("documents") or [])
        language = row.get("language") or self.spec.language
        rec = {"id": key, "user_id": row.get("id"), "task": row["task"] if row.get("task") in TASKS else
               ("qa" if row.get("question") else "summarization"), "language": language, "source": source,
               "response": row["response"], "meta": dict(row.get("meta") or {})}
        if row.get("question"):
            rec["question"] = row["question"]
        if scorer(self.spec.scorer).one_sentence and not rec["meta"].get("window"):   # as ANAH's builders do
            rec["meta"]["window"] = SourceIndex(source, language).window(rec["response"])
        tokenizer = self.predictor.tokenizer          # None: a grounding export reads words, whatever the length
        if tokenizer is not None and not self.spec.evidence_sentences and not uses_pairs(tokenizer):   # encoders chunk
            n = len(prompt_ids(rec, tokenizer, self.spec.template))
            if n > self.spec.max_seq_len:
                raise ValueError(f"{where}: the prompt is {n:,} tokens, over this annotator's trained length "
                                 f"max_seq_len={self.spec.max_seq_len:,} (annotator.json); it is never cut: shorten "
                                 "the source, or use a sentence-level annotator (task.evidence_sentences)")
        return rec

    def output_row(self, rec: dict, pred: dict) -> dict:
        out = {"id": rec["user_id"] if rec["user_id"] is not None else rec["id"]}
        return out | scorer(self.spec.scorer).annotation(rec, pred)


# ---------------------------------------------------------------- the command

def row_problem(row) -> tuple[str, str | None] | None:
    """What an input row lacks for annotation, and the field: (message, field), or None."""
    if not isinstance(row, dict):
        return f"expected a JSON object, found {type(row).__name__}", None
    response = row.get("response")
    if not isinstance(response, str) or not response.strip():
        return "expected a non-empty string", "response"
    has_docs = isinstance(row.get("documents"), list) and all(isinstance(d, str) for d in row["documents"])
    if not (isinstance(row.get("source"), str) and row["source"].strip()) and not has_docs:
        return "expected a non-empty `source` string or a `documents` list of strings", "source"
    return None


def read_rows(path: Path) -> list[tuple[int, dict]]:
    """(line, row) of every input row, each checked for what annotation needs."""
    rows = []
    for line, row in iter_jsonl(path):
        problem = row_problem(row)
        if problem:
            raise RecordError(problem[0], str(path), line, problem[1])
        rows.append((line, row))
    if not rows:
        raise RecordError("no rows: the file is empty", str(path), None)
    return rows


def _done(output: Path, rows: list[tuple[int, dict]], input_path: Path) -> int:
    """How many rows an earlier run wrote; they must be the first rows of this input."""
    written = read_jsonl_to_append(output)
    for k, out in enumerate(written):
        if k >= len(rows) or out.get("id") != (rows[k][1].get("id", f"r{k}")):
            raise ValueError(f"output={output}: row {k + 1} ({out.get('id')!r}) is not row {k + 1} of "
                             f"input={input_path}; use another output file")
    return len(written)


@dataclass
class Annotated:
    written_now: int
    rows: list[dict]              # the input rows, in order
    outputs: list[dict]           # the output file's rows, one per input row
    threshold: float | None       # the annotator's response threshold
    reads: list[str]              # what the annotator read of the rows' fields beyond source and response


def annotate_file(cfg: AnnotateConfig) -> Annotated:
    """Annotate `cfg.input` into `cfg.output`, continuing after the rows already there.

    Rows are predicted in chunks of `rows_per_write` counted from the first input row, and a
    continuation predicts the chunk it was cut in again from that chunk's first row: every row is
    scored in the batch it would have had in an uninterrupted run, so with the same settings
    (`rows_per_write`, `batch_size`, `batch_tokens`) the file is byte for byte the uninterrupted
    one (both runs on one CPU, whichever it is). Other settings form other batches: labels and spans
    stay, probabilities move within float rounding (docs/design.md, "Resume and batch contract").
    """
    input_path, output = Path(cfg.input), Path(cfg.output)
    if not input_path.is_file():
        raise FileNotFoundError(f"input={cfg.input}: expected a JSONL file, found none")
    if not output.parent.is_dir():
        raise FileNotFoundError(f"output={cfg.output}: its directory {output.parent} does not exist")
    if cfg.rows_per_write < 1:
        raise ValueError(f"rows_per_write={cfg.rows_per_write}: expected a positive number of rows")
    rows = read_rows(input_path)
    if cfg.backend == "hf":
        print(dtype_choice(str(cfg.dtype)), flush=True)
    annotator = Annotator.load(cfg.model, cfg.backend, cfg.batch_size, cfg.batch_tokens, cfg.judge, cfg.dtype)
    done = written_before = _done(output, rows, input_path)
    with open(output, "a", encoding="utf-8") as f, progress(total=len(rows), initial=done, desc="annotate",
                                                              unit="row", disable=not cfg.progress) as bar:
        for start in range(done - done % cfg.rows_per_write, len(rows), cfg.rows_per_write):
            chunk = rows[start:start + cfg.rows_per_write]
            records = [annotator.record(row, f"{input_path}:{line}", f"r{start + i}")   # no id: r<k>, its place
                       for i, (line, row) in enumerate(chunk)]
            fresh = annotator.annotate_records(records)[done - start:]
            for out in fresh:
                f.write(json.dumps(out, ensure_ascii=False) + "\n")
            f.flush()
            done += len(fresh)
            bar.update(len(fresh))
    outputs = check_output(rows, output)
    return Annotated(len(rows) - written_before, [row for _, row in rows], outputs, annotator.spec.threshold,
                     fields_read(annotator, rows, input_path))


def fields_read(annotator: Annotator, rows: list[tuple[int, dict]], input_path: Path) -> list[str]:
    """Lines saying how many rows carried the fields the annotator reads beyond source and response: the
    record field its per-group thresholds are chosen by, a grounding export's task type."""
    lines = []
    by = annotator.spec.thresholds_by or getattr(annotator.predictor, "thresholds_by", None)
    if by:
        lines.append(threshold_groups_line(by, annotator.spec.threshold, [row for _, row in rows]))
    if isinstance(annotator.predictor, GroundingAnnotator):
        records = [annotator.record(row, f"{input_path}:{line}", f"r{k}") for k, (line, row) in enumerate(rows)]
        lines.append(task_types_line(annotator.predictor.model.task_types, records))
    return lines


def threshold_groups_line(thresholds_by: dict, threshold: float, rows: list[dict]) -> str:
    """How many rows an export's per-group thresholds decided, and how many fell back to the overall one
    (their field missing, or a value the export has no threshold for)."""
    field, groups = thresholds_by["field"], thresholds_by["values"]
    own, other = _split(Counter(None if value is None else str(value)
                                for value in (field_value(row, field) for row in rows)), groups)
    line = f"thresholds by {field}: {sum(own.values())} rows read their value's ({_listed(own, '')})"
    if other:
        line += (f"; {sum(other.values())} rows have no value among {sorted(groups)} "
                 f"({_listed(other, 'no ' + field)}): the overall threshold {threshold:.4f} decided them")
    return line


def task_types_line(task_types: list[str], records: list[dict]) -> str:
    """How many records are of a task type a grounding export was fitted on, and which are not (it scores those
    with every task feature zero, as it never scored a training record)."""
    own, other = _split(Counter(task_type(rec) for rec in records), task_types)
    line = f"task types ({TASK_TYPE_FIELD}): {sum(own.values())} rows of a type it was fitted on ({_listed(own, '')})"
    if other:
        line += (f"; {sum(other.values())} rows of none of {task_types} ({_listed(other, repr(''))}): scored with no "
                 "task feature set, as no training record was")
    return line


def _split(counts: Counter, known) -> tuple[dict, dict]:
    """`counts` split into the values among `known` and the others."""
    return ({v: n for v, n in counts.items() if v in known}, {v: n for v, n in counts.items() if v not in known})


def _listed(counts: dict, missing: str) -> str:
    """`value n, ...` in order of value, a missing value (None, '') named `missing`; 'none' for no values."""
    return ", ".join(f"{v or missing} {n}" for v, n in sorted(counts.items(), key=str)) or "none"


def check_output(rows: list[tuple[int, dict]], output: Path) -> list[dict]:
    """The output file's rows, held to its contract: one row per input row, in input order, and every
    span `[start, end)` indexing its response (`text` is what it covers)."""
    written = read_jsonl(output)
    if len(written) != len(rows):
        raise RuntimeError(f"{output}: {len(written)} rows for {len(rows)} input rows")
    for k, ((line, row), out) in enumerate(zip(rows, written)):
        if out["id"] != row.get("id", f"r{k}"):
            raise RuntimeError(f"{output}:{k + 1}: id {out['id']!r} for input line {line} ({row.get('id')!r})")
        for span in out["spans"]:
            if row["response"][span["start"]:span["end"]] != span["text"]:
                raise RuntimeError(f"{output}:{k + 1}: span {span} does not index the response")
    return written


@hydra.main(config_path="../configs/annotate", config_name="annotate", version_base="1.3")
@reports_user_errors("eval.annotate")
def main(composed: DictConfig) -> None:
    cfg = typed(composed)
    quiet_libraries(verbose=False)
    done = annotate_file(cfg)
    print(f"{cfg.output}: {done.written_now} rows annotated now, {len(done.rows)} in all; one row per input row, "
          "every span indexes its response")
    for line in done.reads:
        print(line)
    output = Path(cfg.output)
    summary = write_summary(output, done.rows, done.outputs, done.threshold)
    page = write_annotated_page(output, done.rows, done.outputs)
    print(f"\n{summary}\n(written to {output.name}.summary.md; every row with its spans highlighted: {page.name})")


if __name__ == "__main__":
    main()
