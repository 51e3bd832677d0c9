"""The summary `eval.annotate` writes of an annotated file: rates by the columns the input rows carry,
the most frequent flagged spans (case and spacing ignored), and the score histogram."""
from eval.reports.annotation_page import write_annotated_page
from eval.reports.annotation_summary import binned_columns, group_columns, summarize, write_summary


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
    assert group_columns(rows) == ["meta.task_type", "model"]     # a float, a value per row: binned, not listed
    assert binned_columns(rows) == ["temperature"]
    counts = [{**r, "n_tokens": 90 + i % 3} for i, r in enumerate(rows)]        # 3 token counts: categories
    assert "n_tokens" in group_columns(counts) and "n_tokens" not in binned_columns(counts)
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


def test_a_numeric_column_with_many_values_is_counted_by_ranges_not_value_by_value(tmp_path):
    rows, outs = _rows()
    rows = [{**r, "n_tokens": 100 + 7 * i} for i, r in enumerate(rows)]        # 12 token counts, one a row
    by = summarize(rows, outs)["by"]
    assert list(by["n_tokens"]) == ["[100, 121)", "[121, 142)", "[142, 163)", "[163, 177]"]
    assert [g["n"] for g in by["n_tokens"].values()] == [3, 3, 3, 3]
    assert by["n_tokens"]["[100, 121)"]["flagged"] == 1                          # x0 of x0, x1, x2
    text = write_summary(tmp_path / "out.jsonl", rows, outs, threshold=0.4)
    assert "## By `n_tokens` (ranges of about equal rows)" in text and "| 107 |" not in text


def test_the_page_highlights_every_flagged_span_and_escapes_the_text(tmp_path):
    rows, outs = _rows()
    rows[0] = {**rows[0], "response": "<b>Paris</b> is big."}
    outs[0] = {**outs[0], "spans": [{"start": 3, "end": 8, "text": "Paris", "prob": 0.9, "type": "entity"}]}
    page = write_annotated_page(tmp_path / "out.jsonl", rows, outs).read_text()
    assert page.count("<mark ") == sum(len(o["spans"]) for o in outs) == 3
    assert '&lt;b&gt;<mark style="--p: 0.79" title="probability 0.900&#10;type: entity" data-start="3" ' \
           'data-end="8">Paris</mark>&lt;/b&gt; is big.' in page.replace("\n", "&#10;")
    assert page.count('class="row flagged"') == 3 and page.count('class="row clean"') == 9
    assert "http" not in page and 'id="only"' in page
