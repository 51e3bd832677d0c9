"""Scoring ANAH sentence annotations (seed 004, section 4.2) as ANAH's released evaluation does:
type accuracy and weighted F1; RougeL and BERTScore of the generated annotation against the
gold annotation text (jieba words for Chinese); 4-gram precision of the predicted reference
fragments against the document shown to the annotator (fidelity to the source)."""
from __future__ import annotations

from statistics import mean

from data_builders.model_inputs.anah_prompts import annotation_target, reference_of
from data_builders.records import SENTENCE_TYPES
from eval.scorers.decisions import anah_decision
from eval.scorers.metrics import anah_ngram_precision, multiclass_scores, rouge_l, rouge_tokens
from eval.scorers.scorer_spec import Figure, Scorer, Summary, Table, no_plots, pct, span, table_rows

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
    from eval.scorers.bertscore import bertscore_f1

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


def anah_markdown(m: dict) -> list[str]:
    lines = ["| split | n | Acc. | F1 (weighted) | RougeL | BERTScore | Pre4 | parse failures |",
             "|---|---|---|---|---|---|---|---|"]
    groups = [(f"unseen {g.split('_')[1]}", v) for g, v in m.get("by_test_group", {}).items()]
    for name, s in [*m["by_language"].items(), *groups, ("all", m)]:
        lines.append(f"| {name} | {s['n']} | {pct(s['acc'])} | {pct(s['f1_weighted'])} | {pct(s['rougeL'])} | "
                     f"{pct(s.get('bertscore_f1'))} | {pct(s['pre4'])} | {s['parse_failures']} |")
    support = m.get("support") or {}
    if support:
        majority = max(support, key=support.get)
        lines += ["", "| gold type | n | recall |", "|---|---|---|"]
        lines += [f"| {t} | {support[t]} | {pct(m['recall_by_type'][t])} |" for t in support]
        lines += ["", f"Majority class: {majority} ({pct(support[majority] / m['n'])}% of the records); "
                  f"accuracy {pct(m['acc'])}%."]
    return lines + ["", "RougeL and BERTScore compare the generated annotation with the gold annotation text (jieba "
                    "words for Chinese); Pre4 is ANAH's 4-gram precision of the predicted reference fragments against "
                    "the document shown (characters for Chinese, words for English)."]


def anah_tables(metrics: dict) -> dict[str, Table]:
    """Scores per language and overall."""
    keys = ("n", "acc", "f1_weighted", "rougeL", "pre4", "parse_failures")
    return {"languages": (["language", *keys], table_rows({**metrics["by_language"], "all": metrics}, keys))}


def anah_summary(m: dict) -> Summary:
    support = m.get("support") or {}
    return Summary(m.get("n") or 0, m.get("parse_failures", 0), m.get("acc"), None,
                   {t: (r, support.get(t)) for t, r in (m.get("recall_by_type") or {}).items()},
                   max(support.values()) / sum(support.values()) if support else None)


def annotation_row(rec: dict, pred: dict) -> dict:
    """`eval.annotate`'s fields for an ANAH sentence: its type (the whole sentence is the span of a
    contradictory or unverifiable one), a head's score, a generative annotator's reference and
    correction."""
    ann = anah_decision(pred)
    if ann is None:
        return {"label": None, "spans": [], "unparseable": True, "raw": pred.get("output")}
    out = {"label": ann.type}
    if "probs" in pred:
        out["score"] = max(pred["probs"])
    flagged = ann.type in ("contradictory", "unverifiable")
    out["spans"] = [span(rec["response"], 0, len(rec["response"]), ann.type)] if flagged else []
    if "output" in pred:
        out |= {"reference": ann.reference, "correction": ann.correction}
    return out


SCORER = Scorer("anah", "ANAH sentence annotation", ("type",), score_anah, anah_markdown, no_plots, anah_tables,
                tuple(SENTENCE_TYPES), anah_summary, annotation_row, one_sentence=True,
                headline=(Figure("accuracy", ("acc",)),))
