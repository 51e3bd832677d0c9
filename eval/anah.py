"""Scoring ANAH sentence annotations (seed 004, section 4.2) as ANAH's released evaluation does:
type accuracy and weighted F1; RougeL and BERTScore of the generated annotation against the
gold annotation text (jieba words for Chinese); 4-gram precision of the predicted reference
fragments against the document shown to the annotator (fidelity to the source)."""
from __future__ import annotations

from statistics import mean

from data_builders.anah import annotation_target, reference_of
from data_builders.schema import SENTENCE_TYPES
from eval.metrics import anah_ngram_precision, multiclass_scores, rouge_l
from eval.predictions import anah_decision

GOLD_TEMPLATE = "anah_a5"   # tag order of the gold text when a record keeps no released annotation


def gold_text(rec: dict) -> str:
    return (rec.get("meta") or {}).get("annotation") or annotation_target(rec, GOLD_TEMPLATE)


def _mean(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return mean(values) if values else None


def _scores(rows: list[dict]) -> dict:
    out = multiclass_scores([r["gold"] for r in rows], [r["pred"] for r in rows], SENTENCE_TYPES)
    for key in ("rougeL", "pre4", "bertscore_f1"):
        out[key] = _mean(rows, key)
    return out


def _row(rec: dict, pred: dict | None) -> dict:
    ann = anah_decision(pred)
    raw = (pred or {}).get("output")
    lang = "zh" if rec.get("language", "zh").startswith("zh") else "en"
    refs = " ".join(ann.reference) if ann else ""
    return {
        "id": rec["id"], "gold": rec["type"], "pred": ann.type if ann else None, "raw": raw,
        "correct": bool(ann) and ann.type == rec["type"], "language": rec.get("language"),
        "test_group": (rec.get("meta") or {}).get("test_group"), "pred_reference": ann.reference if ann else [],
        "rougeL": rouge_l(raw, gold_text(rec), lang) if isinstance(raw, str) else None,
        "pre4": anah_ngram_precision(refs, reference_of(rec), lang) if refs else None,
    }


def _add_bertscore(gold: list[dict], rows: list[dict], bertscore) -> None:
    from eval.bertscore import bertscore_f1
    from eval.metrics import rouge_tokens

    for lang in ("zh", "en"):
        spec = getattr(bertscore, lang, None)
        todo = [(g, r) for g, r in zip(gold, rows) if isinstance(r["raw"], str) and r["language"] == lang]
        if not (spec and spec.model and todo):
            continue
        prep = (lambda t: " ".join(rouge_tokens(t, "zh"))) if lang == "zh" else (lambda t: t.lower().strip())
        f1 = bertscore_f1([prep(r["raw"]) for _, r in todo], [prep(gold_text(g)) for g, _ in todo],
                          spec.model, spec.num_layers)
        for (_, r), value in zip(todo, f1):
            r["bertscore_f1"] = value


def score_anah(gold: list[dict], preds: dict[str, dict], bertscore=None) -> tuple[dict, list[dict]]:
    rows = [_row(rec, preds.get(rec["id"])) for rec in gold]
    if bertscore is not None:
        _add_bertscore(gold, rows, bertscore)
    metrics = _scores(rows)
    if all(r.get("bertscore_f1") is None for r in rows):
        del metrics["bertscore_f1"]
    metrics["by_language"] = {lang: _scores([r for r in rows if r["language"] == lang])
                              for lang in sorted({r["language"] for r in rows if r["language"]})}
    groups = sorted({r["test_group"] for r in rows if r["test_group"]})
    if groups:     # Table 6: unseen-topic ('T') and unseen-question ('Q') test sets
        metrics["by_test_group"] = {g: _scores([r for r in rows if r["test_group"] == g]) for g in groups}
    metrics["missing_ids"] = [r["id"] for r in gold if r["id"] not in preds]
    return metrics, rows
