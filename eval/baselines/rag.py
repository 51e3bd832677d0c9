"""The sliding-window RAG baseline of LongNovel (seed 000, Appendix D).

The article is cut into blocks of 5,500 characters and the summary into blocks of 150.
Summary block 0 sees article blocks {0, 1, 2}. For each later summary block j, the top K=5
article blocks by embedding cosine similarity are candidates; among those within 2 blocks of
the previous anchor k_{j-1} the most similar becomes k_j, otherwise k_j = k_{j-1} + 1. The
window has 5 blocks centred on k_j when k_j - k_{j-1} is 0 or 1, else 7. Each (summary block,
window) pair is judged by the annotator; a summary is faithful only if every block is.
"""
from __future__ import annotations

import numpy as np

from data_builders.model_inputs.prompts import article_of


def char_blocks(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def align(sim: np.ndarray, top_k: int = 5, max_shift: int = 2) -> list[list[int]]:
    """Article block indices of the window of each summary block; `sim` is [summary, article]."""
    n_sum, n_art = sim.shape
    windows, anchor = [], 0
    for j in range(n_sum):
        if j == 0:
            windows.append(list(range(min(3, n_art))))
            continue
        candidates = np.argsort(-sim[j], kind="stable")[:top_k]
        near = [int(i) for i in candidates if abs(int(i) - anchor) <= max_shift]
        new = max(near, key=lambda i: sim[j, i]) if near else min(anchor + 1, n_art - 1)
        size = 5 if new - anchor in (0, 1) else 7
        lo = max(0, min(new - size // 2, n_art - size))
        windows.append(list(range(lo, min(n_art, lo + size))))
        anchor = new
    return windows


def block_records(record: dict, embedder, article_chars: int = 5500, summary_chars: int = 150,
                  top_k: int = 5) -> list[dict]:
    """One record per summary block, its source being the aligned article window."""
    article, summary = char_blocks(article_of(record), article_chars), char_blocks(record["response"], summary_chars)
    sim = (embedder.encode(summary) @ embedder.encode(article).T).cpu().numpy()
    out = []
    for j, window in enumerate(align(sim, top_k)):
        sub = {k: v for k, v in record.items() if k not in ("documents", "source")}
        out.append({**sub, "id": f"{record['id']}#block{j}", "source": "".join(article[i] for i in window),
                    "response": summary[j], "meta": {**(record.get("meta") or {}), "rag_window": window}})
    return out


def aggregate(record_id: str, block_labels: list[int | None], raw: list[str]) -> dict:
    """Hallucinated if any block is; unreadable if no block is and some block could not be parsed."""
    if any(label == 1 for label in block_labels):
        return {"id": record_id, "label": 1, "blocks": raw}
    if any(label is None for label in block_labels):
        bad = block_labels.index(None)
        return {"id": record_id, "output": raw[bad], "blocks": raw}    # scored as a parse failure
    return {"id": record_id, "label": 0, "blocks": raw}
