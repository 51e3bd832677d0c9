"""The summary `eval.annotate` writes of an annotated file: rates by the columns the input rows carry,
the most frequent flagged spans (case and spacing ignored), and the score histogram."""
from eval.reports.annotation_summary import group_columns, summarize, write_summary


def _rows() -> tuple[list[dict], list[dict]]:
    rows, outs = [], []
    for i in range(12):
        model, task = ("gpt", "qa") if i % 3 == 0 else ("llama", "summary")
        rows.append({"id": f"x{i}", "source": "s", "response": f"Paris is big {i}.", "model": model,
                     "temperature": 0.7 + i / 100, "meta": {"task_type": task, "doc": f"d{i}"}})
        flagged = i % 4 == 0
        spans = [{"start": 0, "end": 5, "text": "Paris" if i else " PARIS "}] if flagged else []
        outs.append({"id": f"x{i}", "label": "hallucinated" if flagged else "faithful", "score": i / 12,
                     "spans": spans})
    outs[5] = {"id": "x5", "label": None, "spans": [], "unparseable": True, "raw": "?"}
    return rows, outs


def test_only_scalar_columns_with_few_values_group_the_rows():
    rows, _ = _rows()
    assert group_columns(rows) == ["meta.task_type", "model"]     # a float, a value per row: no grouping
    pairs = [{**r, "meta": {"doc": f"d{i // 2}"}} for i, r in enumerate(rows)]
    assert group_columns(pairs) == ["meta.doc", "model"]
    many = [{**r, "meta": {"doc": f"d{i // 2}"}} for i, r in enumerate(rows * 6)]    # 36 documents: too many
    assert group_columns(many) == ["model"]


def test_rates_by_column_count_flagged_and_unparseable_rows():
    rows, outs = _rows()
    summary = summarize(rows, outs)
    assert (summary["all"]["n"], summary["all"]["flagged"], summary["all"]["unparseable"]) == (12, 3, 1)
    by_model = summary["by"]["model"]
    assert (by_model["gpt"]["n"], by_model["gpt"]["flagged"]) == (4, 1)          # x0, x3, x6, x9: x0
    assert (by_model["llama"]["n"], by_model["llama"]["flagged"], by_model["llama"]["unparseable"]) == (8, 2, 1)
    assert summary["top_spans"] == [("paris", 3)] and summary["labels"]["None"] == 1


def test_the_written_summary_has_its_histogram_and_tables(tmp_path):
    rows, outs = _rows()
    text = write_summary(tmp_path / "out.jsonl", rows, outs, threshold=0.4)
    assert text == (tmp_path / "out.jsonl.summary.md").read_text()
    assert "| gpt | 4 | 1 | 25.0 | 0 | 0.375 |" in text and "| paris | 3 |" in text
    assert "![scores](out.jsonl.scores.png)" in text
    assert (tmp_path / "out.jsonl.scores.png").read_bytes()[:4] == b"\x89PNG"
    unscored = [{k: v for k, v in o.items() if k != "score"} for o in outs]
    assert "![scores]" not in write_summary(tmp_path / "gen.jsonl", rows, unscored, None)
    assert not (tmp_path / "gen.jsonl.scores.png").exists()
