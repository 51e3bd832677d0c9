"""Batched greedy decoding and head inference give the same answers as one prompt at a time."""
from types import SimpleNamespace

import pytest
import torch

from eval.backends.in_process import predict_records
from models.annotator import load_annotator
from models.builders import resolve_model_path
from models.generate import greedy_batch, greedy_completions, length_batches, unbatched_note

RECORDS = [{"id": f"r{i}", "task": "summarization", "language": "zh", "source": "他走进了房间。" * (3 + 5 * i),
            "response": "他走了。" * (1 + i % 3), "label": i % 2} for i in range(6)]


def test_length_batches_cover_every_prompt_longest_first():
    prompts = [[0] * n for n in (3, 9, 1, 7, 5)]
    batches = length_batches(prompts, 2)
    assert batches == [[1, 3], [4, 0], [2]]


def test_equal_length_batches_never_mix_lengths_and_respect_the_token_budget():
    prompts = [[0] * n for n in (3, 9, 3, 7, 3, 3)]
    assert length_batches(prompts, 8, equal_length=True) == [[1], [3], [0, 2, 4, 5]]
    assert length_batches(prompts, 8, max_tokens=18) == [[1, 3], [0, 2, 4, 5]]
    assert length_batches([[0] * 40], 8, max_tokens=18) == [[0]]     # a prompt over the budget still runs


def test_a_judge_whose_prompts_differ_in_length_is_told_they_decode_in_small_batches():
    paired = [[0] * (10 + i // 2) for i in range(40)]            # two prompts of each length, as RAGTruth's
    note = unbatched_note(paired, length_batches(paired, 8, equal_length=True), 8)
    assert note is not None and "40 prompts of 20 lengths decode in 20 batches where" in note
    assert "prompts of any length would fill 5;" in note
    equal = [[0] * 12 for _ in range(20)]
    assert unbatched_note(equal, length_batches(equal, 8, equal_length=True), 8) is None
    assert unbatched_note(paired, length_batches(paired, 1, equal_length=True), 1) is None     # one at a time: as asked
    budget = length_batches(paired, 8, equal_length=True, max_tokens=20)    # the token budget allows one a batch
    assert unbatched_note(paired, budget, 8, batch_tokens=20) is None


def test_greedy_batch_refuses_prompts_of_different_lengths(tokenizer):
    model = load_annotator(resolve_model_path("embedded:qwen3-tiny"), "generative")
    with pytest.raises(ValueError, match="one length"):
        greedy_batch(model, tokenizer, [[5, 6, 7], [5, 6]], 2)


def test_completion_tokens_stop_at_the_end_token_and_leave_a_batch_s_padding_out(tokenizer):
    model = load_annotator(resolve_model_path("embedded:qwen3-tiny"), "generative")
    prompts = [[100 * i + 3, 40 + i, 7, 900 + i] for i in range(4)]
    free = model.generate(input_ids=torch.tensor(prompts), max_new_tokens=6, do_sample=False,
                          pad_token_id=0)[:, 4:].tolist()
    end = free[0][0]                   # the first row's first new token ends it at once
    ended = greedy_completions(model, SimpleNamespace(eos_token_id=end, pad_token_id=None, decode=tokenizer.decode),
                               prompts, 6)
    expected = [ids.index(end) + 1 if end in ids else 6 for ids in free]
    assert [(c["prompt_tokens"], c["completion_tokens"]) for c in ended] == [(4, n) for n in expected]
    assert expected[0] == 1 and 6 in expected      # another row decoded on, the first one padded: not counted


@pytest.mark.parametrize("kind", ["generative", "discriminative", "spans"])
def test_batched_equals_one_at_a_time(tokenizer, kind):
    model = load_annotator(resolve_model_path("embedded:qwen3-tiny"), kind, "binary")
    task, seen = SimpleNamespace(kind=kind, template="prompt_e"), []
    one = predict_records(model, tokenizer, RECORDS, task, 12, batch_size=1)
    many = predict_records(model, tokenizer, RECORDS, task, 12, batch_size=4, on_result=seen.append)
    assert [r["id"] for r in many] == [r["id"] for r in RECORDS] and len(seen) == len(RECORDS)
    if kind == "generative":
        assert [r["output"] for r in many] == [r["output"] for r in one]
        assert any(r["output"] for r in one)
    else:
        for a, b in zip(one, many):
            assert b["probs"] == pytest.approx(a["probs"], abs=1e-5)
            if kind == "spans":      # every response token, with its offsets into the response
                assert [t[:2] for t in b["token_probs"]] == [t[:2] for t in a["token_probs"]]
                assert [t[2] for t in b["token_probs"]] == pytest.approx([t[2] for t in a["token_probs"]], abs=1e-5)
                rec = next(r for r in RECORDS if r["id"] == b["id"])
                assert b["token_probs"][0][0] == 0 and b["token_probs"][-1][1] == len(rec["response"])


def test_padded_batches_run_through_predict_records_in_full_batches(tokenizer):
    """The plumbing on the tiny model (which repeats its last token, whatever its positions): one
    padded batch of every length. SmolLM2's answers check the positions (tests/test_smollm2.py)."""
    model = load_annotator(resolve_model_path("embedded:qwen3-tiny"), "generative")
    task = SimpleNamespace(kind="generative", template="prompt_e")
    one = predict_records(model, tokenizer, RECORDS, task, 12, batch_size=1)
    padded = predict_records(model, tokenizer, RECORDS, task, 12, batch_size=len(RECORDS), padded=True)
    assert [r["output"] for r in padded] == [r["output"] for r in one]
    rows = greedy_completions(model, tokenizer, [[5, 6, 7, 8, 9], [11, 12], [13, 14, 15]], 6, padded=True)
    assert [r["prompt_tokens"] for r in rows] == [5, 2, 3]
