"""Stage sample selection, skipping of over-long samples, and the batch order."""
import pytest
from omegaconf import OmegaConf

from configs.schema import TaskConfig
from data_builders.model_inputs.collate import IGNORE_INDEX, collate, encode_sample
from train.data import DataError, StagePlan, plan_stage, stage_samples

TASK = OmegaConf.structured(TaskConfig(kind="generative", template="prompt_e"))
REC = {"id": "x", "task": "summarization", "language": "zh", "source": "原文" * 50, "response": "摘要",
       "label": 0, "length_bucket": "S"}


def _stage(**kw):
    return OmegaConf.create({"name": "s", "bucket": "S", "max_seq_len": 4096, "epochs": 2.0,
                             "max_steps": None, **kw})


def test_labels_are_the_shifted_target(tokenizer):
    s = encode_sample(REC, tokenizer)
    ids, labels = s["input_ids"], s["shift_labels"]
    assert len(ids) == len(labels) and labels[-1] == IGNORE_INDEX
    first = next(i for i, x in enumerate(labels) if x != IGNORE_INDEX)
    assert all(labels[t] == ids[t + 1] for t in range(first, len(ids) - 1))
    assert ids[-1] == tokenizer.eos_token_id
    target = tokenizer.decode(ids[first + 1:], skip_special_tokens=True)
    assert target == '{"has_hallucination": "无幻觉", "details": []}'


def _labelled_text(sample, tokenizer) -> str:
    ids, labels = sample["input_ids"], sample["shift_labels"]
    return tokenizer.decode([ids[t + 1] for t in range(len(ids) - 1) if labels[t] != IGNORE_INDEX])


def test_response_lm_labels_the_faithful_summary_sentences_only(tokenizer):
    """task.response_lm: the summary's faithful sentences are targets too; a hallucinated
    sentence never is, and nothing else of the prompt."""
    good, bad = "甲在城中遇见了乙。乙答应了。", "甲带着三把剑上路。"
    rec = {**REC, "response": good + bad + "丙走了。", "label": 1, "hallucinated_sentences": [bad]}
    text = _labelled_text(encode_sample(rec, tokenizer, "prompt_e", response_lm=True), tokenizer)
    assert text.startswith(good + "丙走了。{") and bad not in text.split("{")[0]
    faithful = _labelled_text(encode_sample({**rec, "label": 0}, tokenizer, "prompt_e", True), tokenizer)
    assert faithful.startswith(rec["response"] + "{")
    # a hallucinated sentence that is not in the response: no summary token is known to be faithful
    elsewhere = {**rec, "hallucinated_sentences": ["别的句子。"]}
    assert encode_sample(elsewhere, tokenizer, "prompt_e", True) == encode_sample(elsewhere, tokenizer)


def test_collate_pads_and_masks(tokenizer):
    a, b = encode_sample(REC, tokenizer), encode_sample({**REC, "source": "原文"}, tokenizer)
    batch = collate([a, b], tokenizer.pad_token_id)
    assert batch["input_ids"].shape == (2, len(a["input_ids"]))
    assert batch["attention_mask"][1].sum() == len(b["input_ids"])
    assert (batch["shift_labels"][1, len(b["input_ids"]):] == IGNORE_INDEX).all()
    assert "attention_mask" not in collate([a], tokenizer.pad_token_id)


def test_long_samples_are_skipped_and_counted(tokenizer):
    short = [{**REC, "id": f"s{i}"} for i in range(19)]
    long = {**REC, "id": "long", "source": "原文很长" * 2000}
    samples, skipped = stage_samples(short + [long], _stage(max_seq_len=2048), tokenizer, TASK, 0.1)
    assert (len(samples), skipped) == (19, 1)
    assert all(len(s["input_ids"]) <= 2048 for s in samples)
    with pytest.raises(DataError, match="1 of 20 samples .* longer than max_seq_len=2048"):
        stage_samples(short + [long], _stage(max_seq_len=2048), tokenizer, TASK, 0.01)


def test_empty_stage_fails(tokenizer):
    with pytest.raises(DataError, match="no training records in bucket 'M'"):
        stage_samples([REC], _stage(bucket="M"), tokenizer, TASK, 0.05)
    with pytest.raises(DataError, match="fewer than one optimizer step"):
        plan_stage(_stage(), n_samples=3, dp_size=2, micro_batch=1, grad_accum=2, seed=0, cap=None)


def test_a_stage_takes_one_bucket_several_or_all():
    from configs.rules import needed_buckets
    from data_builders.sources import in_bucket

    records = [{"id": b, "length_bucket": b} for b in "SML"]
    assert [r["id"] for r in in_bucket(records, "M")] == ["M"]
    assert [r["id"] for r in in_bucket(records, "S+L")] == ["S", "L"]
    assert [r["id"] for r in in_bucket(records, "all")] == ["S", "M", "L"]
    assert needed_buckets(["S", "S+M", "all"], ["L"], evaluates=True) == ["S", "M", "L"]
    # "all" still builds the buckets the evaluation names
    assert needed_buckets(["S", "S+M", "all"], ["L"], evaluates=False) == ["S", "M", "L"]
    assert needed_buckets(["S"], ["L"], evaluates=False) == ["S"]


def test_a_stage_over_several_buckets_takes_them_in_the_order_it_names(tokenizer):
    records = [{**REC, "id": "m", "length_bucket": "M"}, {**REC, "id": "s", "length_bucket": "S"}]
    samples, _ = stage_samples(records, _stage(bucket="S+M"), tokenizer, TASK, 0.0)
    assert [x["id"] for x in samples] == ["s", "m"]
    samples, _ = stage_samples(records, _stage(bucket="all"), tokenizer, TASK, 0.0)
    assert [x["id"] for x in samples] == ["m", "s"]


def test_plan_steps_epochs_and_caps():
    assert plan_stage(_stage(), 10, 2, 1, 1, 0, None).total_steps == 10          # 2 epochs x 5
    assert plan_stage(_stage(max_steps=100), 10, 2, 1, 1, 0, None).total_steps == 100
    assert plan_stage(_stage(max_steps=100), 10, 2, 1, 1, 0, 7).total_steps == 7


@pytest.mark.parametrize("dp, micro, accum", [(1, 1, 1), (2, 1, 2), (4, 2, 1), (2, 2, 3)])
def test_each_step_splits_its_global_batch_across_ranks(dp, micro, accum):
    plan = StagePlan(n_samples=50, dp_size=dp, micro_batch=micro, grad_accum=accum, total_steps=30, seed=1)
    seen_in_epoch = []
    for step in range(plan.steps_per_epoch):
        per_rank = [sum(plan.rank_indices(step, r), []) for r in range(dp)]
        flat = sum(per_rank, [])
        assert len(flat) == len(set(flat)) == plan.per_step
        seen_in_epoch += flat
    assert len(set(seen_in_epoch)) == plan.steps_per_epoch * plan.per_step   # no repeats within an epoch
    # the same global batch whatever the split between data parallelism and accumulation
    as_dp = StagePlan(50, dp * accum, micro, 1, 30, 1)
    assert sorted(sum(as_dp.rank_indices(3, 0) + as_dp.rank_indices(3, 1), [])) == \
        sorted(sum(StagePlan(50, 1, micro, dp * accum, 30, 1).rank_indices(3, 0)[:2], []))


def test_encoded_samples_are_cached_by_records_tokenizer_and_settings(tokenizer, tmp_path):
    from data_builders.sample_cache import encoded_samples

    calls = []

    def encode(rec, tok):
        calls.append(rec["id"])
        return encode_sample(rec, tok)

    records = [{**REC, "id": f"r{i}", "source": "原文" * (5 + i)} for i in range(4)]
    first = encoded_samples(records, encode, tokenizer, "a", root=tmp_path)
    assert first == [encode_sample(r, tokenizer) for r in records] and len(calls) == 4
    assert encoded_samples(records, encode, tokenizer, "a", root=tmp_path) == first and len(calls) == 4
    encoded_samples(records, encode, tokenizer, "b", root=tmp_path)                  # other settings
    encoded_samples(records[:3] + [{**records[3], "response": "别的"}], encode, tokenizer, "a", root=tmp_path)
    assert len(calls) == 12 and len(list((tmp_path / "samples").iterdir())) == 3
