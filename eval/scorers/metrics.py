"""Binary detection metrics as LongNovel reports them (seed 000, section 4.3).

Acc is the mean of the accuracies on hallucinated and on faithful samples; an
unparseable output counts as wrong, i.e. as the opposite of its gold label.
"""
from __future__ import annotations

from collections import Counter


def _sk():
    """sklearn.metrics, imported at the first score: a second off the start of every process that
    never scores (each training rank but the first)."""
    from sklearn import metrics

    return metrics


def binary_scores(gold: list[int], pred: list[int | None]) -> dict:
    if len(gold) != len(pred):
        raise ValueError(f"gold has {len(gold)} labels, predictions {len(pred)}")
    effective = [p if p is not None else 1 - g for g, p in zip(gold, pred)]
    per_class = {}
    for cls, name in ((1, "hallu_acc"), (0, "nonhallu_acc")):
        hits = [e == g for g, e in zip(gold, effective) if g == cls]
        per_class[name] = sum(hits) / len(hits) if hits else None
    present = [v for v in per_class.values() if v is not None]
    return {
        "acc": sum(present) / len(present) if present else None,
        "mcc": float(_sk().matthews_corrcoef(gold, effective)) if gold else None,
        **per_class,
        "n": len(gold),
        "parse_failures": sum(p is None for p in pred),
    }


def recall(rows: list[tuple[int, int | None]]) -> dict:
    """Share of hallucinated samples flagged as hallucinated; rows are (gold, pred)."""
    hits = [p == 1 for g, p in rows if g == 1]
    return {"recall": sum(hits) / len(hits) if hits else None, "n": len(hits)}


def roc_auc(gold: list[int], scores: list[float | None] | None) -> float | None:
    """ROC AUC of the annotator's response scores (higher = more likely hallucinated): how well it ranks,
    whatever its threshold. None unless every row has a score and both classes are present."""
    if not scores or any(s is None for s in scores) or len(set(gold)) < 2:
        return None
    return float(_sk().roc_auc_score(gold, scores))


def binary_classification(gold: list[int], pred: list[int | None], scores: list[float | None] | None = None) -> dict:
    """Accuracy, balanced accuracy, F1 / precision / recall of the hallucinated class, macro F1, MCC, and the
    ROC AUC of `scores` (each row's response score, where the annotator gives one).

    A failed parse counts as the opposite of its gold label.
    """
    base = binary_scores(gold, pred)
    effective = [p if p is not None else 1 - g for g, p in zip(gold, pred)]
    return {
        "acc": sum(e == g for g, e in zip(gold, effective)) / len(gold),
        "balanced_acc": base["acc"],
        "f1": float(_sk().f1_score(gold, effective, zero_division=0)),
        "f1_macro": float(_sk().f1_score(gold, effective, average="macro", zero_division=0)),
        "precision": float(_sk().precision_score(gold, effective, zero_division=0)),
        "recall": float(_sk().recall_score(gold, effective, zero_division=0)),
        "mcc": base["mcc"], "n": base["n"], "parse_failures": base["parse_failures"],
        "roc_auc": roc_auc(gold, scores),
    }


def rows_classification(rows: list[dict]) -> dict:
    """`binary_classification` of a scorer's rows, each with its `gold` and `pred` label and its `score`."""
    return binary_classification([r["gold"] for r in rows], [r["pred"] for r in rows], [r["score"] for r in rows])


def _ngrams(units: list[str], n: int) -> Counter:
    return Counter(tuple(units[i:i + n]) for i in range(len(units) - n + 1))


def anah_ngram_precision(candidate: str, source: str, language: str, n: int = 4) -> float:
    """ANAH's n-gram precision of predicted reference fragments against the document shown
    (its released eval code): lower-cased characters for Chinese, whitespace tokens for
    English; the clipped overlap is divided by the number of *distinct* candidate n-grams."""
    def units(t: str) -> list[str]:
        return list(t.lower()) if language == "zh" else t.lower().split()

    cand = _ngrams(units(candidate), n)
    common = cand & _ngrams(units(source), n)
    return sum(common.values()) / len(cand) if common else 0.0


def rouge_tokens(text: str, language: str) -> list[str]:
    """jieba words for Chinese; rouge-score's own tokenisation (lower-cased alphanumerics) otherwise."""
    if language == "zh":
        import jieba

        jieba.setLogLevel(60)
        return [w for w in jieba.lcut(text) if w.strip()]
    from rouge_score import tokenize

    return tokenize.tokenize(text, None)


def rouge_l(candidate: str, reference: str, language: str) -> float:
    """ROUGE-L F1 via the rouge-score package, on `rouge_tokens`."""
    from rouge_score import rouge_scorer

    class _Tokens:
        def tokenize(self, text):
            return rouge_tokens(text, language)

    scorer = rouge_scorer.RougeScorer(["rougeL"], tokenizer=_Tokens())
    return scorer.score(reference, candidate)["rougeL"].fmeasure


def multiclass_scores(gold: list[str], pred: list[str | None], labels: tuple[str, ...]) -> dict:
    effective = [p if p is not None else "<parse failure>" for p in pred]
    return {
        "acc": sum(p == g for g, p in zip(gold, effective)) / len(gold),
        "f1_weighted": float(_sk().f1_score(gold, effective, labels=sorted(set(gold)), average="weighted",
                                      zero_division=0)),
        "n": len(gold), "parse_failures": sum(p is None for p in pred),
        "support": {label: gold.count(label) for label in labels if label in gold},
        "recall_by_type": {label: sum(p == g == label for g, p in zip(gold, effective)) / gold.count(label)
                           for label in labels if label in gold},
    }
