"""UHGEval's keyword-level judgement (IAAR-Shanghai/UHGEval, `eval_disc_keyword.py`), written from its
definition: per item, the first N unreasonable and the first N reasonable keywords, N the smaller
of the two counts; a keyword is judged hallucinated when a predicted span overlaps it, or as a keyword
judge answered (eval/aggregation/by_keyword.py; an answer it cannot read counts wrong); the item's accuracy is the
share judged right of those 2N; the figure is the mean over items, an item without such a pair (N = 0)
scoring 0. UHGEval's repository leaves out the items without a pair and those with an unreadable answer:
the mean over the items it keeps is shown beside it.
"""
from __future__ import annotations

from eval.scorers.binary import annotation_row
from eval.scorers.scorer_spec import Figure, Scorer, Summary, no_plots, no_tables
from eval.scorers.spans import prediction_spans


def balanced_keywords(keywords: list[dict]) -> list[dict]:
    bad = [k for k in keywords if k["hallucinated"]]
    good = [k for k in keywords if not k["hallucinated"]]
    n = min(len(bad), len(good))
    return bad[:n] + good[:n]


def judged_hallucinated(keyword: dict, spans: list[tuple[int, int]]) -> bool:
    return keyword["start"] is not None and any(s < keyword["end"] and keyword["start"] < e for s, e in spans)


def judged_keywords(chosen: list[dict], pred: dict | None) -> list[int | None] | None:
    """Each chosen keyword's judgement (1 hallucinated, 0 not, None unreadable): a keyword judge's own answers
    (`keyword_labels`, eval/aggregation/by_keyword.py), else whether a predicted span overlaps it; None without a
    prediction."""
    if pred is not None and "keyword_labels" in pred:
        if pred.get("keywords") != [k["text"] for k in chosen]:
            raise ValueError(f"prediction {pred.get('id')!r}: its keywords {pred.get('keywords')} are not the ones "
                             f"UHGEval's metric reads for this item, {[k['text'] for k in chosen]}")
        return pred["keyword_labels"]
    spans = prediction_spans(pred)
    return None if spans is None else [int(judged_hallucinated(k, spans)) for k in chosen]


def score_uhgeval(gold: list[dict], preds: dict[str, dict], bertscore=None) -> tuple[dict, list[dict]]:
    rows = []
    for rec in gold:
        chosen = balanced_keywords(rec["meta"]["keywords"])
        judged = judged_keywords(chosen, preds.get(rec["id"]))
        right = sum(j is not None and j == k["hallucinated"] for j, k in zip(judged or [], chosen))
        acc = right / len(chosen) if chosen and judged is not None else 0.0
        rows.append({"id": rec["id"], "keywords": len(chosen), "right": right, "acc": acc,
                     "unreadable": sum(j is None for j in judged or []),
                     "gold": 1, "pred": None if judged is None else int(any(judged)),
                     "correct": judged is not None and right == len(chosen)})
    # UHGEval leaves out an item without a pair, or with an answer it cannot read
    valid = [r for r in rows if r["keywords"] and r["pred"] is not None and not r["unreadable"]]
    metrics = {"n": len(rows), "acc": sum(r["acc"] for r in rows) / len(rows),
               "acc_paired": sum(r["acc"] for r in valid) / len(valid) if valid else None,
               "n_paired": len(valid), "keywords_per_item": sum(r["keywords"] for r in rows) / len(rows),
               "unreadable_keywords": sum(r["unreadable"] for r in rows),
               "parse_failures": sum(r["pred"] is None for r in rows),
               "missing_ids": [r["id"] for r in gold if r["id"] not in preds]}
    return metrics, rows


def uhgeval_markdown(m: dict) -> list[str]:
    acc = "-" if m["acc_paired"] is None else f"{100 * m['acc_paired']:.2f}"
    return ["| items | keyword accuracy (mean over items) | items UHGEval keeps | accuracy over them "
            "| keywords per item | unreadable answers | without prediction |", "|---|---|---|---|---|---|---|",
            f"| {m['n']} | {100 * m['acc']:.2f} | {m['n_paired']} | {acc} | {m['keywords_per_item']:.3f} | "
            f"{m['unreadable_keywords']} | {m['parse_failures']} |"]


def uhgeval_summary(m: dict) -> Summary:
    return Summary(m["n"], m["parse_failures"], m["acc"], None, {}, None)


SCORER = Scorer("uhgeval", "UHGEval keyword-level judgement", ("spans",), score_uhgeval, uhgeval_markdown, no_plots,
                no_tables, (0, 1), uhgeval_summary, annotation_row, " (1 = some span predicted)", unit_threshold=True,
                headline=(Figure("keyword accuracy", ("acc",)),))
