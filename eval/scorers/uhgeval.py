"""UHGEval's keyword-level judgement (IAAR-Shanghai/UHGEval, `eval_disc_keyword.py`), written from its
definition: per item, the first N unreasonable and the first N reasonable keywords, N the smaller
of the two counts; a keyword is judged hallucinated when a predicted span overlaps it; the item's
accuracy is the share judged right of those 2N; the figure is the mean over items. As the
repository computes it, an item without such a pair (N = 0) scores 0 and counts; the mean over the
items with a pair is shown beside it.
"""
from __future__ import annotations

from eval.scorers.base import Scorer, Summary, no_plots, no_tables
from eval.scorers.binary import annotation_row
from eval.scorers.spans import prediction_spans


def balanced_keywords(keywords: list[dict]) -> list[dict]:
    bad = [k for k in keywords if k["hallucinated"]]
    good = [k for k in keywords if not k["hallucinated"]]
    n = min(len(bad), len(good))
    return bad[:n] + good[:n]


def judged_hallucinated(keyword: dict, spans: list[tuple[int, int]]) -> bool:
    return keyword["start"] is not None and any(s < keyword["end"] and keyword["start"] < e for s, e in spans)


def score_uhgeval(gold: list[dict], preds: dict[str, dict], bertscore=None) -> tuple[dict, list[dict]]:
    rows = []
    for rec in gold:
        chosen = balanced_keywords(rec["meta"]["keywords"])
        spans = prediction_spans(preds.get(rec["id"]))
        judged = [judged_hallucinated(k, spans) for k in chosen] if spans is not None else None
        right = sum(j == k["hallucinated"] for j, k in zip(judged or [], chosen))
        acc = right / len(chosen) if chosen and judged is not None else 0.0
        rows.append({"id": rec["id"], "keywords": len(chosen), "right": right, "acc": acc,
                     "gold": 1, "pred": None if spans is None else int(bool(spans)),
                     "correct": judged is not None and right == len(chosen)})
    paired = [r for r in rows if r["keywords"]]
    metrics = {"n": len(rows), "acc": sum(r["acc"] for r in rows) / len(rows),
               "acc_paired": sum(r["acc"] for r in paired) / len(paired) if paired else None,
               "n_paired": len(paired), "keywords_per_item": sum(r["keywords"] for r in rows) / len(rows),
               "parse_failures": sum(r["pred"] is None for r in rows),
               "missing_ids": [r["id"] for r in gold if r["id"] not in preds]}
    return metrics, rows


def uhgeval_markdown(m: dict) -> list[str]:
    acc = "-" if m["acc_paired"] is None else f"{100 * m['acc_paired']:.2f}"
    return ["| items | keyword accuracy (UHGEval's mean) | items with a pair | accuracy over them | keywords per item "
            "| without prediction |", "|---|---|---|---|---|---|",
            f"| {m['n']} | {100 * m['acc']:.2f} | {m['n_paired']} | {acc} | {m['keywords_per_item']:.3f} | "
            f"{m['parse_failures']} |"]


def uhgeval_summary(m: dict) -> Summary:
    return Summary(m["n"], m["parse_failures"], m["acc"], None, {}, None)


SCORER = Scorer("uhgeval", "UHGEval keyword-level judgement", ("spans",), score_uhgeval, uhgeval_markdown, no_plots,
                no_tables, (0, 1), uhgeval_summary, annotation_row, " (1 = some span predicted)", unit_threshold=True)
