import torch

from data_builders.model_inputs.collate import collate, encode_sample
from models.builders import load_causal_lm, resolve_model_path
from models.loss import token_loss_sum
from train.loss_reduction import backward_scale

REC = {"id": "x", "task": "summarization", "language": "zh", "source": "原文" * 30, "response": "摘要",
       "label": 1, "hallucination_types": ["entity"], "hallucinated_sentences": ["甲做了乙"],
       "corrections": ["丙做了乙"], "reasons": ["原文是丙"]}


def test_token_loss_equals_hf_loss_on_response_tokens(tokenizer):
    model = load_causal_lm(resolve_model_path("embedded:qwen3-tiny"))
    s = encode_sample(REC, tokenizer)
    batch = collate([s], tokenizer.pad_token_id)
    loss_sum, n = token_loss_sum(model, batch)
    labels = torch.tensor([[-100] + s["shift_labels"][:-1]])       # HF shifts labels itself
    ref = model(input_ids=batch["input_ids"], labels=labels).loss
    assert n == sum(x != -100 for x in s["shift_labels"])
    torch.testing.assert_close(loss_sum / n, ref, rtol=1e-5, atol=1e-6)


def test_backward_scale_gives_the_global_token_mean():
    # 2 ranks x 2 accumulation steps with uneven token counts
    sums = [[3.0, 5.0], [7.0, 1.0]]
    tokens = [[3, 10], [2, 5]]
    total = sum(map(sum, tokens))
    scale = backward_scale(world_size=2, grad_accum=2, global_tokens=total)
    # DeepSpeed: divide each backward by grad_accum, then average over ranks
    effective = sum(sum(s * scale / 2 for s in rank) for rank in sums) / 2
    assert abs(effective - sum(map(sum, sums)) / total) < 1e-12


def test_chunked_loss_has_the_gradient_of_full_logits_and_stores_no_logits(tokenizer):
    """Two padded samples with labels on their summaries (task.response_lm) and targets: the loss
    and gradients of 7-position chunks equal those of full fp32 logits, and no tensor of vocabulary
    width is kept for backward."""
    from models.response_lm import ResponseLM

    model = load_causal_lm(resolve_model_path("embedded:qwen3-tiny"), "float32")
    samples = [encode_sample({**REC, "id": str(i), "source": "原文" * (20 + 9 * i), "response": "甲做了乙。丙来了。"},
                             tokenizer, response_lm=True) for i in range(2)]
    batch = collate(samples, tokenizer.pad_token_id)
    labels = batch["shift_labels"]
    logits = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"],
                   attention_mask=batch["attention_mask"]).logits.float()
    full = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="sum")
    full.backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()

    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.shape) or t, lambda t: t):
        loss, n = ResponseLM(model, chunk_tokens=7)(**batch)
    loss.backward()
    assert n == int((labels != -100).sum()) > 14                       # three chunks or more
    assert not [s for s in saved if s[-1] == model.config.vocab_size], "logits were stored for backward"
    torch.testing.assert_close(loss, full, rtol=1e-5, atol=1e-5)
    for p, g in zip(model.parameters(), expected):       # fp32 sums in another order: relative to the norm
        assert torch.linalg.vector_norm(p.grad - g) <= 1e-5 * torch.linalg.vector_norm(g)
