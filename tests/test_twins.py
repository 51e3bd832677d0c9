"""Hallucinated twins (data_builders/synthetic/twins.py): one edit each, its span exactly the new text, and
nothing borrowed from outside the records given (a fold's test sources never reach its training)."""
import json
import random

import pytest

from configs.schema import DataConfig, SyntheticConfig
from data_builders.folds import deal_folds
from data_builders.records import read_records, write_jsonl
from data_builders.synthetic.twins import EDITS, SyntheticSettings, make_pool, synthesize, twins_of

EN = {"id": "en-1", "task": "summarization", "language": "en", "label": 0, "spans": [],
      "source": "The museum opened in 1998 in Paris and holds 240 paintings by Claude Monet and Edgar Degas. "
                "It is free on Sundays.",
      "response": "The museum, founded by Claude Monet, opened in 1998 and holds 240 paintings. It is free on Sundays."}
ZH = {"id": "zh-1", "task": "summarization", "language": "zh", "label": 0, "spans": [],
      "source": "李娜于2005年从上海来到北京大学，和张伟一起在清华大学任教12年。",
      "response": "张伟在北京大学工作了12年，他是一名教授。"}
OTHERS = [{**EN, "id": "en-2", "source": "A bakery.", "response": "The bakery sells bread every morning."},
          {**ZH, "id": "zh-2", "source": "一家面包店。", "response": "这家面包店每天早上卖面包。"}]


def _every_kind(rec: dict) -> dict[str, dict]:
    pool = make_pool([rec, *OTHERS])
    found = {}
    for seed in range(40):                    # each seed tries the kinds in another order
        for twin in twins_of(rec, random.Random(seed), pool, EDITS, len(EDITS)):
            found.setdefault(twin["meta"]["edit"], twin)
    return found


@pytest.mark.parametrize("rec", [EN, ZH], ids=["en", "zh"])
def test_each_edit_kind_marks_exactly_the_text_it_changed(rec):
    twins = _every_kind(rec)
    assert set(twins) == set(EDITS)
    for kind, twin in twins.items():
        (span,) = twin["spans"]
        a, b = span["start"], span["end"]
        new = twin["response"]
        assert twin["label"] == 1 and span["type"] == kind and twin["hallucination_types"] == [kind]
        assert new[a:b].strip() == new[a:b] and new[a:b]                  # the span is the new text, trimmed
        assert new != rec["response"]
        tail = len(new) - b                                                # the text after the span is untouched,
        assert new[b:] == rec["response"][len(rec["response"]) - tail:]     # and so is the text before it
        assert rec["response"].startswith(new[:a].rstrip()) or kind == "event_fabrication"
        assert twin["source"] == rec["source"] and twin["meta"]["twin_of"] == rec["id"]
    assert twins["entity"]["response"][slice(*_span(twins["entity"]))] in rec["source"]   # a name the source has
    inserted = twins["event_fabrication"]
    assert inserted["response"][slice(*_span(inserted))] in {o["response"].rstrip("。.") + t for o in OTHERS
                                                             for t in ("。", ".")}


def _span(rec: dict) -> tuple[int, int]:
    return rec["spans"][0]["start"], rec["spans"][0]["end"]


def test_swapped_and_distractor_pairings_keep_their_labels():
    made, counts = synthesize([EN, *OTHERS], SyntheticSettings(swapped=1.0, distractor=1.0))
    swapped = [r for r in made if r["meta"]["edit"] == "swapped"]
    distracted = [r for r in made if r["meta"]["edit"] == "distractor"]
    assert len(swapped) == len(distracted) == counts["faithful"] == 3
    for r in swapped:
        assert r["label"] == 1 and r["spans"] == [{"start": 0, "end": len(r["response"]), "type": "swapped"}]
    for r in distracted:
        original = next(x for x in [EN, *OTHERS] if x["id"] == r["meta"]["twin_of"])
        assert r["label"] == 0 and r["source"].startswith(original["source"]) and r["source"] != original["source"]


def test_unknown_edit_kinds_are_refused():
    with pytest.raises(ValueError, match="unknown \\['typo'\\]"):
        synthesize([EN], SyntheticSettings(twins=1, edits=("typo",)))


def _benchmark(n_sources: int) -> list[dict]:
    rng = random.Random(0)
    rows = []
    for s in range(n_sources):
        source = f"Report {s}: the plant in Springfield employs {100 + s} people and opened in {1990 + s}."
        for j in range(3):
            label = int(rng.random() < 0.3)
            response = f"Source {s} says the plant in Springfield employs {100 + s} people. It is open ({j})."
            rows.append({"id": f"s{s}-r{j}", "task": "summarization", "language": "en", "source": source,
                         "response": response, "label": label, "spans": []})
    return rows


def test_folds_gain_twins_of_their_training_part_only(tmp_path):
    root = tmp_path / "bench"
    root.mkdir()
    write_jsonl(root / "test.jsonl", _benchmark(12))
    synthetic = SyntheticConfig(twins=2, swapped=0.5, distractor=0.5)
    report = deal_folds(DataConfig(source="records", root=str(root), folds=3, synthetic=synthetic), tmp_path / "folds")
    assert report.count("synthetic: ") == 3
    for i in range(3):
        part = {name: read_records(tmp_path / "folds" / f"fold_{i}" / f"{name}.jsonl") for name in ("train", "test")}
        real = [r for r in part["train"] if "twin_of" not in (r.get("meta") or {})]
        made = [r for r in part["train"] if "twin_of" in (r.get("meta") or {})]
        assert made and not any("~" in r["id"] for r in part["test"])
        train_sources = {r["source"] for r in real}
        train_ids = {r["id"] for r in real}
        train_sentences = " ".join(r["response"] for r in real)
        for r in made:
            assert r["meta"]["twin_of"] in train_ids
            assert r["meta"].get("source_of", r["meta"]["twin_of"]) in train_ids
            assert r["meta"].get("distractor_of", r["meta"]["twin_of"]) in train_ids
            if r["meta"]["edit"] == "event_fabrication":
                a, b = _span(r)
                assert r["response"][a:b] in train_sentences
        assert not {r["source"] for r in part["test"]} & train_sources


def test_the_command_writes_valid_records_and_counts_them(tmp_path, capsys):
    from data_builders.synthetic.twins import main

    src = tmp_path / "in.jsonl"
    write_jsonl(src, [EN, ZH, *OTHERS])
    assert main([str(src), "--out", str(tmp_path / "out.jsonl"), "--per-record", "2"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(read_records(tmp_path / "out.jsonl")) == len(rows)
    per_record = {rec["id"]: [r["meta"]["edit"] for r in rows if r["meta"]["twin_of"] == rec["id"]]
                  for rec in (EN, ZH, *OTHERS)}
    assert all(len(set(kinds)) == len(kinds) for kinds in per_record.values())   # another kind each time
    assert len(per_record["en-1"]) == len(per_record["zh-1"]) == 2             # both allow every kind
    assert per_record["en-2"] == per_record["zh-2"] == ["event_fabrication"]   # nothing else to edit there
    assert f"from 4 faithful records (0 allowed no edit); {len(rows)} records written" in capsys.readouterr().out
