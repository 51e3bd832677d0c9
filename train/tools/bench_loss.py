"""Peak host memory of the generative loss at 32k tokens with Qwen3's 151,936-token vocabulary:
the LM head on every labelled position at once (the loss before `models.response_lm`) against
`ResponseLM`'s chunks. A tiny decoder (hidden 64) keeps the rest of the step small; the logits,
which are what the chunks bound, do not depend on the hidden size.

    python -m train.tools.bench_loss [--labelled 4096] [--chunk 1024]
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from train.host_memory import peak_rss, reset_peak_rss, return_freed_memory

QWEN3_VOCAB = 151_936


def _model(vocab: int):
    from transformers import AutoModelForCausalLM, Qwen3Config

    cfg = Qwen3Config(vocab_size=vocab, hidden_size=64, intermediate_size=192, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=40960,
                      tie_word_embeddings=True)
    return AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa", dtype=torch.float32)


def _full_logits_loss(model, batch: dict) -> torch.Tensor:
    keep = (batch["shift_labels"] != -100).any(dim=0).nonzero().squeeze(1)
    logits = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"], logits_to_keep=keep).logits
    return F.cross_entropy(logits.float().flatten(0, 1), batch["shift_labels"][:, keep].flatten(), reduction="sum")


def _growth(step) -> int:
    before = reset_peak_rss() and peak_rss()
    step().backward()
    return peak_rss() - before


def measure(length: int = 32768, labelled: int = 4096, chunk: int = 1024, vocab: int = QWEN3_VOCAB) -> dict:
    from models.response_lm import ResponseLM

    return_freed_memory()
    torch.manual_seed(0)
    model = _model(vocab)
    ids = torch.randint(0, vocab, (1, length))
    labels = torch.full((1, length), -100)
    labels[0, -labelled - 1:-1] = ids[0, -labelled:]
    batch = {"input_ids": ids, "position_ids": torch.arange(length)[None], "shift_labels": labels}
    full = _growth(lambda: _full_logits_loss(model, batch))
    model.zero_grad(set_to_none=True)
    chunked = _growth(lambda: ResponseLM(model, chunk)(**batch)[0])
    return {"length": length, "labelled": labelled, "chunk": chunk, "vocab": vocab,
            "logits_bytes_fp32": 4 * labelled * vocab, "full_peak_growth": full, "chunked_peak_growth": chunked}


def row(r: dict) -> str:
    return (f"| loss peak RSS growth at {r['length'] // 1024}k, {r['labelled']:,} labelled positions, vocab "
            f"{r['vocab']:,}: all logits / chunks of {r['chunk']} | {r['full_peak_growth'] / 2**30:.2f} GiB / "
            f"{r['chunked_peak_growth'] / 2**30:.2f} GiB | one chunk of logits |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--length", type=int, default=32768)
    parser.add_argument("--labelled", type=int, default=4096)
    parser.add_argument("--chunk", type=int, default=1024)
    args = parser.parse_args()
    print(row(measure(args.length, args.labelled, args.chunk)))


if __name__ == "__main__":
    main()
