"""BERTScore F1 of generated annotations against the gold ones, per language, with the
models ANAH used (bert-base-chinese for zh, roberta-large for en) given as local paths."""
from __future__ import annotations


def bertscore_f1(candidates: list[str], references: list[str], model: str, num_layers: int,
                 batch_size: int = 32) -> list[float]:
    from bert_score import score

    _, _, f1 = score(candidates, references, model_type=model, num_layers=num_layers, batch_size=batch_size)
    return f1.tolist()
