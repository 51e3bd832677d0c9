"""Importers of released datasets and the HalluMix transforms, on fixture rows in the released schemas."""
import json
import random

import pytest

from data_builders.importers.hallumix import (
    add_distractors,
    balanced_sample,
    chunk_sentences,
    import_hallumix,
    mismatched,
    nli_example,
    swap_typed_answer,
)
from data_builders.importers.halueval import import_halueval
from data_builders.importers.ragtruth import import_ragtruth
from data_builders.records import RecordError


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


HALUEVAL = {
    "qa": {"knowledge": "Paris is the capital of France.", "question": "Capital of France?",
           "right_answer": "Paris", "hallucinated_answer": "Lyon"},
    "dialogue": {"knowledge": "Alice wrote Book X.", "dialogue_history": "[Human]: Who wrote Book X?",
                 "right_response": "Alice did.", "hallucinated_response": "Bob did."},
    "summarization": {"document": "The match ended 2-1.", "right_summary": "It ended 2-1.",
                      "hallucinated_summary": "It ended 3-1."},
    "general": {"ID": "7", "user_query": "Tell me a joke.", "chatgpt_response": "Why...", "hallucination": "no"},
}


@pytest.mark.parametrize("subset", sorted(HALUEVAL))
def test_halueval(tmp_path, subset):
    records = import_halueval(_jsonl(tmp_path / f"{subset}.json", [HALUEVAL[subset]]), subset)
    if subset == "general":
        assert [(r["label"], r["id"]) for r in records] == [(0, "halueval-general-general-7")]
        return
    assert [r["label"] for r in records] == [0, 1] and records[0]["source"] == records[1]["source"]
    assert records[1]["response"] in HALUEVAL[subset].values()


def test_halueval_bad_rows(tmp_path):
    row = {k: v for k, v in HALUEVAL["qa"].items() if k != "right_answer"}
    with pytest.raises(RecordError, match="qa.json:2 field 'right_answer'"):
        import_halueval(_jsonl(tmp_path / "qa.json", [HALUEVAL["qa"], row]), "qa")
    bad = {**HALUEVAL["general"], "hallucination": "maybe"}
    with pytest.raises(RecordError, match="field 'hallucination'"):
        import_halueval(_jsonl(tmp_path / "g.json", [bad]), "general")


def test_ragtruth(tmp_path):
    sources = [{"source_id": "s1", "task_type": "QA", "source_info": {"question": "Who?", "passages": "Ann did."},
                "prompt": "..."},
               {"source_id": "s2", "task_type": "Summary", "source_info": "Long news text.", "prompt": "..."}]
    responses = [{"id": "1", "source_id": "s1", "model": "m", "split": "train", "response": "Bob did.",
                  "labels": [{"start": 0, "end": 3, "text": "Bob", "label_type": "Evident Conflict"}]},
                 {"id": "2", "source_id": "s2", "model": "m", "split": "test", "response": "A summary.", "labels": []}]
    info = _jsonl(tmp_path / "source_info.jsonl", sources)
    out = import_ragtruth(_jsonl(tmp_path / "response.jsonl", responses), info)
    (qa,), (summ,) = out["train"], out["test"]
    assert (qa["task"], qa["label"], qa["question"], qa["hallucinated_sentences"]) == ("qa", 1, "Who?", ["Bob"])
    assert qa["spans"] == [{"start": 0, "end": 3, "type": "Evident Conflict", "text": "Bob"}]
    assert (summ["task"], summ["label"], summ["source"]) == ("summarization", 0, "Long news text.")
    orphan = [{**responses[0], "source_id": "nope"}]
    with pytest.raises(RecordError, match="response.jsonl:1 field 'source_id'"):
        import_ragtruth(_jsonl(tmp_path / "response.jsonl", orphan), tmp_path / "source_info.jsonl")


def test_hallumix_import(tmp_path):
    rows = [{"documents": ["a.", "b."], "answer": "c.", "hallucination_label": 1, "source": "snli"}]
    (rec,) = import_hallumix(_jsonl(tmp_path / "h.jsonl", rows))
    assert (rec["documents"], rec["response"], rec["label"], rec["meta"]["source"]) == (["a.", "b."], "c.", 1, "snli")
    with pytest.raises(RecordError, match="h.jsonl:1 field 'hallucination_label'"):
        import_hallumix(_jsonl(tmp_path / "h.jsonl", [{**rows[0], "hallucination_label": 2}]))
    with pytest.raises(RecordError, match="field 'documents'"):
        import_hallumix(_jsonl(tmp_path / "h.jsonl", [{**rows[0], "documents": "a."}]))


def test_hallumix_transforms():
    rng = random.Random(0)
    assert nli_example("p", "h", "entailment", "snli")["label"] == 0
    assert nli_example("p", "h", "neutral", "snli")["label"] == 1
    assert nli_example("p", "h", "contradiction", "snli")["label"] == 1
    examples = [{"documents": [f"doc {i}."], "answer": f"ans {i}.", "label": 0, "source": "cnn"} for i in range(5)]
    for orig, bad in zip(examples, mismatched(examples, rng)):
        assert bad["label"] == 1 and bad["answer"] == orig["answer"] and bad["documents"] != orig["documents"]
    swapped = swap_typed_answer({**examples[0], "answer": "1990"}, ["1990", "1985"], rng)
    assert (swapped["answer"], swapped["label"]) == ("1985", 1)
    assert swap_typed_answer({**examples[0], "answer": "1990"}, ["1990"], rng) is None


def test_chunks_keep_whole_sentences():
    text = " ".join(f"Sentence number {i} is here." for i in range(40))
    chunks = chunk_sentences(text, "en", target_chars=120)
    assert " ".join(chunks) == text and all(c.endswith(".") for c in chunks)
    assert max(len(c) for c in chunks) <= 120 + len("Sentence number 39 is here.")


def test_distractors_only_for_faithful_and_balanced_sampling():
    rng = random.Random(1)
    pool = [f"unrelated chunk {i}." for i in range(30)]
    faithful = {"documents": ["a.", "b."], "answer": "a.", "label": 0, "source": "s"}
    out = add_distractors(faithful, pool, rng)
    assert len(out["documents"]) == 12 and set(faithful["documents"]) <= set(out["documents"])
    hallucinated = {**faithful, "label": 1}
    assert add_distractors(hallucinated, pool, rng) == hallucinated
    examples = [{"source": s, "label": label, "documents": [], "answer": str(i)}
                for i, (s, label) in enumerate([("x", 0)] * 10 + [("x", 1)] * 3 + [("y", 0)] * 4 + [("y", 1)] * 8)]
    sample = balanced_sample(examples, per_source=8, rng=rng)
    counts = {(s, lab): sum(1 for e in sample if (e["source"], e["label"]) == (s, lab)) for s in "xy" for lab in (0, 1)}
    assert counts == {("x", 0): 3, ("x", 1): 3, ("y", 0): 4, ("y", 1): 4}
