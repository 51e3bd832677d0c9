"""Scoring SummEdits (factualNLG's benchmark): balanced accuracy per domain, and overall as the
benchmark's table gives it, the mean of the domains' balanced accuracies; beside them the published
systems on the same domains. A record's domain is `meta.domain` (the importer's, from the file name).
"""
from __future__ import annotations

from eval.scorers.binary import annotation_row
from eval.scorers.decisions import binary_decision, response_score
from eval.scorers.metrics import rows_classification
from eval.scorers.scorer_spec import Figure, Scorer, Summary, no_plots, no_tables, num, pct

# The benchmark's ten domains, as its released files name them (summedits_<domain>.json), in the order of its table.
DOMAINS = ("podcast", "billsum", "samsum", "news", "sales_call", "sales_email", "shakespeare", "scitldr", "qmsumm",
           "ectsum")
# Balanced accuracy of the published systems (factualNLG's README, 2023-12-14) on each domain, in DOMAINS
# order, then their overall over all ten.
PUBLISHED = (
    ("Llama2-7b", (50.0, 50.0, 50.0, 50.6, 50.9, 50.0, 50.0, 50.0, 50.7, 51.4, 50.4)),
    ("Dav001", (53.3, 50.2, 51.0, 54.4, 55.5, 52.5, 50.0, 51.0, 50.1, 50.9, 51.9)),
    ("DAE", (54.4, 55.1, 58.7, 60.9, 50.4, 53.6, 53.6, 54.7, 52.0, 58.3, 55.2)),
    ("Cohere-cmd-xl", (51.1, 52.7, 51.3, 52.6, 60.2, 59.4, 50.0, 60.5, 54.5, 60.5, 55.3)),
    ("Vicuna-13b", (52.8, 52.5, 51.3, 63.5, 57.9, 51.8, 55.4, 59.7, 54.0, 62.4, 56.1)),
    ("SummaCConv", (58.1, 55.2, 53.1, 61.9, 59.0, 53.7, 59.3, 59.7, 53.5, 57.9, 57.1)),
    ("Mistral-7b", (50.0, 55.5, 56.7, 59.8, 63.4, 59.7, 53.5, 59.6, 55.9, 63.7, 57.8)),
    ("Llama2-13b", (51.3, 54.6, 57.2, 59.3, 63.1, 58.1, 58.6, 63.4, 56.5, 61.4, 58.4)),
    ("Claudev13", (60.4, 51.9, 64.5, 63.4, 61.3, 57.0, 58.1, 57.8, 56.9, 68.1, 59.9)),
    ("Dav002", (56.4, 53.9, 57.1, 61.9, 65.1, 59.1, 56.6, 64.6, 60.6, 66.2, 60.1)),
    ("Bard", (50.0, 58.1, 61.3, 71.6, 73.3, 70.6, 58.7, 66.0, 53.9, 72.7, 63.6)),
    ("QAFactEval", (63.7, 54.2, 66.2, 74.4, 68.4, 63.6, 61.6, 67.5, 62.4, 72.6, 65.5)),
    ("PaLM-bison", (66.0, 62.0, 69.0, 68.4, 74.4, 68.1, 61.6, 78.1, 70.4, 72.4, 69.0)),
    ("Dav003", (65.7, 59.9, 67.6, 71.0, 78.8, 69.2, 69.7, 74.4, 72.2, 77.8, 70.6)),
    ("CGPT", (68.4, 63.6, 69.1, 74.4, 79.4, 65.5, 68.0, 75.6, 69.2, 78.6, 71.2)),
    ("Claudev2", (68.7, 61.7, 75.4, 75.5, 81.0, 67.4, 74.0, 78.1, 74.8, 79.2, 73.6)),
    ("Claudev21", (72.6, 66.0, 75.7, 77.2, 82.0, 68.5, 73.2, 78.6, 72.7, 77.1, 74.4)),
    ("Gemini-pro", (73.7, 60.2, 75.7, 77.6, 86.9, 74.2, 71.9, 77.6, 74.0, 83.1, 75.5)),
    ("GPT4", (82.7, 71.1, 83.1, 83.3, 87.9, 79.5, 84.0, 82.4, 79.6, 87.0, 82.1)),
    ("Human Perf.", (90.8, 87.5, 89.4, 90.0, 91.8, 87.4, 96.9, 89.3, 90.7, 95.4, 90.9)),
)


def _domain(rec: dict) -> str:
    return (rec.get("meta") or {}).get("domain") or "unknown"


def score_summedits(gold: list[dict], preds: dict[str, dict], bertscore=None) -> tuple[dict, list[dict]]:
    """Metrics and per-record rows; a gold id without a prediction counts as a parse failure (the
    opposite of its label)."""
    rows = []
    for rec in gold:
        pred, _ = binary_decision(preds.get(rec["id"]))
        raw = preds.get(rec["id"], {})
        rows.append({"id": rec["id"], "gold": rec["label"], "pred": pred, "correct": pred == rec["label"],
                     "domain": _domain(rec), "raw": raw.get("output", raw.get("probs")),
                     "score": response_score(preds.get(rec["id"]))})
    by_domain = {}
    for d in sorted({r["domain"] for r in rows}, key=lambda d: (d not in DOMAINS, DOMAINS.index(d) if d in DOMAINS
                                                                  else 0, d)):
        sub = [r for r in rows if r["domain"] == d]
        by_domain[d] = rows_classification(sub)
    pooled = rows_classification(rows)
    metrics = {"n": len(rows), "parse_failures": pooled["parse_failures"],
               "balanced_acc": sum(m["balanced_acc"] for m in by_domain.values()) / len(by_domain),
               "pooled": pooled, "by_domain": by_domain,
               "missing_ids": [r["id"] for r in gold if r["id"] not in preds]}
    return metrics, rows


def summedits_markdown(m: dict) -> list[str]:
    domains = list(m["by_domain"])
    lines = ["| domain | n | balanced acc. | F1 (inconsistent) | MCC | ROC AUC | parse failures |",
             "|---|---|---|---|---|---|---|"]
    for d, s in m["by_domain"].items():
        lines.append(f"| {d} | {s['n']} | {pct(s['balanced_acc'])} | {pct(s['f1'])} | {s['mcc']:.4f} | "
                     f"{num(s.get('roc_auc'))} | {s['parse_failures']} |")
    lines.append(f"| overall (mean of the domains) | {m['n']} | {pct(m['balanced_acc'])} | | | | "
                 f"{m['parse_failures']} |")
    known = [d for d in domains if d in DOMAINS]
    if not known:
        return lines
    lines += ["", "Published systems on the same domains (balanced accuracy; flagging everything scores 50.00):", "",
              "| system | " + " | ".join(known) + " | mean of these | overall (10 domains) |",
              "|---" * (len(known) + 3) + "|",
              "| **this run** | " + " | ".join(pct(m["by_domain"][d]["balanced_acc"]) for d in known) +
              f" | {pct(sum(m['by_domain'][d]['balanced_acc'] for d in known) / len(known))} | |"]
    for name, values in PUBLISHED:
        per = [values[DOMAINS.index(d)] for d in known]
        lines.append(f"| {name} | " + " | ".join(f"{v:.1f}" for v in per) +
                     f" | {sum(per) / len(per):.2f} | {values[-1]:.1f} |")
    return lines


def summedits_summary(m: dict) -> Summary:
    return Summary(m["n"], m["parse_failures"], m["balanced_acc"], m["pooled"]["mcc"], {}, None)


SCORER = Scorer("summedits", "SummEdits: consistent or not, per domain", ("label",), score_summedits,
                summedits_markdown, no_plots, no_tables, (0, 1), summedits_summary, annotation_row,
                " (1 = inconsistent)",
                headline=(Figure("balanced accuracy, mean of the domains", ("balanced_acc",)),))
