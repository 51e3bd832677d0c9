"""Discriminative heads: shapes, losses, pooling, and a separable task learnt to near-perfect accuracy."""
import pytest
import torch

from data_builders.model_inputs.collate import collate_classification, encode_classification, head_target
from data_builders.model_inputs.head_targets import head_of
from models.builders import resolve_model_path
from models.heads import PooledClassifier, classification_loss_sum, last_token_state, load_classifier
from train.sequence_parallel import shard_batch


@pytest.fixture(scope="module")
def base_path():
    return resolve_model_path("embedded:qwen3-tiny")


@pytest.mark.parametrize("head, n", [("binary", 2), ("anah", 4), ("faithfulness", 4)])
def test_head_shapes(base_path, head, n):
    model = PooledClassifier(load_classifier(base_path, head))
    assert model.model.config.num_labels == n == len(head_of(head).labels)
    ids = torch.randint(3, 100, (3, 17))
    logits = model(ids, torch.arange(17).expand(3, 17), torch.tensor([16, 10, 3]))
    assert logits.shape == (3, n)


def test_pooling_reads_each_rows_last_token(base_path):
    model = PooledClassifier(load_classifier(base_path, "binary")).eval()
    a, b = torch.randint(3, 100, (1, 9)), torch.randint(3, 100, (1, 5))
    padded = torch.cat([a, torch.cat([b, torch.zeros(1, 4, dtype=torch.long)], 1)])
    mask = torch.tensor([[1] * 9, [1] * 5 + [0] * 4])
    together = model(padded, torch.arange(9).expand(2, 9), torch.tensor([8, 4]), attention_mask=mask)
    alone = model(b, torch.arange(5)[None], torch.tensor([4]))
    torch.testing.assert_close(together[1], alone[0], atol=1e-5, rtol=1e-5)


def test_losses():
    logits = torch.tensor([[2.0, 0.0], [0.0, 3.0]])
    labels = torch.tensor([0, 1])
    ce = torch.nn.functional.cross_entropy(logits, labels, reduction="sum")
    torch.testing.assert_close(classification_loss_sum(logits, labels, False), ce)
    weighted = classification_loss_sum(logits, labels, False, class_weights=[1.0, 3.0])
    parts = torch.nn.functional.cross_entropy(logits, labels, reduction="none")
    torch.testing.assert_close(weighted, parts[0] + 3 * parts[1])
    assert classification_loss_sum(logits, labels, False, focal_gamma=2.0) < ce     # focal down-weights easy ones
    multi = classification_loss_sum(torch.zeros(2, 4), torch.tensor([[1, 0, 0, 1], [0, 0, 0, 0]]), True)
    torch.testing.assert_close(multi, 2 * torch.log(torch.tensor(2.0)))


def test_last_token_state_without_group():
    hidden = torch.arange(24.0).view(2, 3, 4)
    state = last_token_state(hidden, torch.tensor([2, -1]))
    assert state[0].tolist() == hidden[0, 2].tolist() and state[1].tolist() == [0.0] * 4


def test_targets_and_sharded_last_index(tokenizer):
    rec = {"id": "x", "task": "qa", "language": "zh", "source": "原文" * 20, "response": "答", "label": 1,
           "type": "unverifiable", "faithfulness_labels": ["extrinsic"]}
    assert head_target(rec, "binary") == 1 and head_target(rec, "anah") == 2
    assert head_target(rec, "faithfulness") == [0, 1, 0, 0]
    batch = collate_classification([encode_classification(rec, tokenizer, "prompt_e", "binary")], 0)
    n = batch["input_ids"].shape[1]
    owners = [int(shard_batch(batch, 2, r, 0)["last_index"][0]) for r in range(2)]
    assert sorted(o >= 0 for o in owners) == [False, True]          # exactly one rank holds it
    holder = owners.index(max(owners))
    shard = shard_batch(batch, 2, holder, 0)
    assert shard["input_ids"][0, owners[holder]] == batch["input_ids"][0, n - 1]


def test_head_learns_a_separable_task(base_path):
    """A few hundred steps on 'does the text contain token 7?' reach near-perfect accuracy."""
    torch.manual_seed(0)
    model = PooledClassifier(load_classifier(base_path, "binary"))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)

    def batch(n=16, length=12):
        ids = torch.randint(10, 200, (n, length))
        labels = torch.randint(0, 2, (n,))
        where = torch.randint(0, length, (n,))
        ids[labels.bool(), where[labels.bool()]] = 7
        return ids, labels

    for _ in range(300):
        ids, labels = batch()
        logits = model(ids, torch.arange(12).expand(len(ids), 12), torch.full((len(ids),), 11))
        loss = classification_loss_sum(logits, labels, False) / len(ids)
        opt.zero_grad()
        loss.backward()
        opt.step()
    ids, labels = batch(256)
    with torch.no_grad():
        pred = model(ids, torch.arange(12).expand(256, 12), torch.full((256,), 11)).argmax(-1)
    assert (pred == labels).float().mean() > 0.95


def test_threshold_is_chosen_for_balanced_accuracy():
    from eval.scorers.decisions import binary_decision
    from eval.thresholds import choose_threshold

    gold = [0, 0, 0, 1, 1, 1]
    p = [0.05, 0.10, 0.20, 0.25, 0.30, 0.90]          # separable, but not at 0.5
    t = choose_threshold(gold, p)
    assert 0.20 < t <= 0.25
    assert [binary_decision({"probs": [1 - x, x], "threshold": t})[0] for x in p] == gold
    assert binary_decision({"probs": [0.7, 0.3]})[0] == 0                   # no threshold: argmax
    with pytest.raises(ValueError, match="both classes"):
        choose_threshold([1, 1], [0.2, 0.3])
