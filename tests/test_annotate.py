"""`python -m eval.annotate`: a trained export labels anyone's outputs, the same way `eval/run.py`
scores it; offsets index the responses; interrupted runs continue; bad input gives one line."""
import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest
from huggingface_hub import ModelCard

from eval.annotate import Annotator
from eval.scorers.scoring import scorer
from models.export_spec import PIPELINE_TAGS, SPEC_FILE, AnnotatorSpec, ExportError, write_model_card
from tests.conftest import REPO, torchrun
from tests.served import Server, served_rows
from tests.snippets import card_snippet
from tests.tolerance import SCORE_ATOL, assert_same_annotations
from train.run_dir import read_train_log

SMALL = ["parallel=none", "trainer.progress=false", "logger.wandb=false", "data.corpus.n_books=4",
         "data.corpus.units_per_book=10", "data.corpus.unit_chars_min=250", "data.corpus.unit_chars_max=350",
         "data.corpus.test_books=1", "data.bucket_budgets.M=4096", "optim.micro_batch_size=4",
         "curriculum.stages=[{name: s2k, bucket: S, max_seq_len: 2048, max_steps: 3},"
         "{name: s4k, bucket: M, max_seq_len: 4096, max_steps: 2}]",
         "eval.buckets=[S,M]", "eval.max_per_bucket=3", "eval.max_new_tokens=24"]
EXPORT = ("checkpoints", "1-s4k", "hf")


def _run(args: list[str], timeout: int = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


@pytest.fixture(scope="module", params=["longnovel_discriminative_demo", "longnovel_curriculum_demo"])
def trained(request, tmp_path_factory):
    """A run of a demo at a small size, and eval/run.py's scores of its export."""
    run = tmp_path_factory.mktemp(request.param)
    proc = torchrun(2, [f"+exp={request.param}", *SMALL, f"output_dir={run}"])
    assert proc.returncode == 0, proc.stderr[-4000:]
    (run / "torchrun.stdout").write_text(proc.stdout, encoding="utf-8")
    scored = run / "eval_run"
    proc = _run([str(REPO / "eval" / "run.py"), f"+exp={request.param}", *SMALL, "data.source=records",
                 f"data.root={run / 'data'}", f"checkpoint={run.joinpath(*EXPORT)}", f"output_dir={scored}"])
    assert proc.returncode == 0, proc.stderr[-4000:]
    return run, scored


def test_sentence_level_demos_train_and_score(trained):
    """The demos' sentence-level detectors (`trained`: longnovel_discriminative_demo and
    longnovel_curriculum_demo at a small size): response sentences against their evidence, data-parallel
    over both ranks, a summary judged by its most suspicious sentence."""
    run, _ = trained
    log = read_train_log(run)
    n_records = sum(1 for line in (run / "data" / "train.jsonl").read_text().splitlines()
                    if '"length_bucket": "S"' in line)
    stdout = (run / "torchrun.stdout").read_text(encoding="utf-8")
    n_sentences = int(re.search(r"stage 0 s2k: bucket S, (\d+) samples", stdout).group(1))
    assert n_sentences >= 5 * n_records, "one training sample per summary sentence"
    rows = [json.loads(x) for x in (run / "eval" / "predictions.parsed.jsonl").read_text().splitlines()]
    gold = {json.loads(x)["id"]: json.loads(x) for x in (run / "data" / "test.jsonl").read_text().splitlines()}
    flagged = [r for r in rows if "flagged_sentence" in r]
    assert all(r["flagged_sentence"] in gold[r["id"]]["response"] for r in flagged), "it flags a summary sentence"
    metrics = json.loads((run / "eval" / "metrics.json").read_text())
    per_bucket = Counter(g["length_bucket"] for g in gold.values())
    assert metrics["overall"]["n"] == len(rows) == sum(min(3, per_bucket[b]) for b in "SM"), \
        "eval.max_per_bucket=3 of buckets S and M"
    config = json.loads(run.joinpath(*EXPORT, "config.json").read_text())
    if "discriminative" not in run.name:      # generated verdicts, one per sentence
        assert config["architectures"] == ["Qwen3ForCausalLM"]
        assert all(r["raw"] is None or isinstance(r["raw"], str) for r in rows)
        return
    assert [r["target_tokens"] for r in log] == [8] * 5, "a head step counts samples: 2 ranks x micro-batch 4"
    assert config["architectures"] == ["Qwen3ForSequenceClassification"]
    assert config["id2label"] == {"0": "faithful", "1": "hallucinated"}
    assert all(len(r["raw"]) == 2 and abs(sum(r["raw"]) - 1) < 1e-5 for r in rows)
    assert len(flagged) == len(rows) and metrics["overall"]["parse_failures"] == 0
    # the decision threshold comes from the validation book and travels with the checkpoint
    assert (run / "data" / "val.jsonl").exists()
    assert config["decision_threshold"] == metrics["decision_threshold"]
    assert config["decision_threshold_source"].startswith("validation split")


def _unlabelled(gold_path, out_path) -> list[dict]:
    rows = [{"id": r["id"], "source": r["source"], "response": r["response"]}
            for r in map(json.loads, gold_path.read_text(encoding="utf-8").splitlines())]
    out_path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return rows


def _annotate(export, inp, out, *extra, env: dict | None = None) -> subprocess.CompletedProcess:
    return _run(["-m", "eval.annotate", f"model={export}", f"input={inp}", f"output={out}", "progress=false", *extra],
                env=env)


@pytest.mark.slow
@pytest.mark.over_budget("builds the trained export (a 2-rank training and its eval run) its module reuses")
def test_annotate_agrees_with_eval_run_and_offsets_index_the_responses(trained, tmp_path):
    run, scored = trained
    rows = _unlabelled(scored / "gold.jsonl", tmp_path / "in.jsonl")
    proc = _annotate(run.joinpath(*EXPORT), tmp_path / "in.jsonl", tmp_path / "out.jsonl")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [o["id"] for o in out] == [r["id"] for r in rows]
    parsed = {r["id"]: r for r in map(json.loads, (scored / "scores" / "predictions.parsed.jsonl").read_text()
                                     .splitlines())}
    raw = {r["id"]: r for r in map(json.loads, (scored / "predictions.jsonl").read_text().splitlines())}
    for o, r in zip(out, rows):
        want = {1: "hallucinated", 0: "faithful", None: None}[parsed[o["id"]]["pred"]]
        assert o["label"] == want, o
        for span in o["spans"]:
            assert r["response"][span["start"]:span["end"]] == span["text"] and span["text"].strip()
        if o["label"] == "hallucinated" and raw[o["id"]].get("flagged_sentence"):
            assert raw[o["id"]]["flagged_sentence"] in [s["text"] for s in o["spans"]]
    spec = AnnotatorSpec.load(run.joinpath(*EXPORT))
    assert spec.evidence_sentences == 3 and spec.template == "sentence_check" and spec.max_seq_len == 4096
    card = (run.joinpath(*EXPORT) / "README.md").read_text()
    assert "## Held-out evaluation" in card and "| overall |" in card and "python -m eval.annotate" in card
    meta = ModelCard.load(run.joinpath(*EXPORT) / "README.md").data.to_dict()     # what the Hub reads
    assert meta["pipeline_tag"] == PIPELINE_TAGS[spec.kind] and meta["library_name"] == "transformers"
    scored_mcc = scorer(spec.scorer).summary(json.loads((run / "eval" / "metrics.json").read_text())).mcc
    [result] = meta["model-index"][0]["results"]
    assert {m["type"]: m["value"] for m in result["metrics"]}["mcc"] == round(scored_mcc, 4)
    if spec.kind == "discriminative":
        assert spec.threshold is not None and spec.threshold_source.startswith("validation split")
        assert all(0 <= o["score"] <= 1 for o in out)


@pytest.mark.slow
def test_an_interrupted_run_continues_with_no_row_missing_or_twice(trained, tmp_path):
    """Cut inside a chunk of rows_per_write rows: the continuation predicts that chunk again from
    its first row, so every row is scored in the batch it had in the uninterrupted run and the
    file is byte for byte the same, whatever the CPU's kernels."""
    run, scored = trained
    _unlabelled(scored / "gold.jsonl", tmp_path / "in.jsonl")
    export = run.joinpath(*EXPORT)
    assert _annotate(export, tmp_path / "in.jsonl", tmp_path / "all.jsonl", "rows_per_write=3").returncode == 0
    whole = (tmp_path / "all.jsonl").read_text().splitlines()
    assert len(whole) > 4
    (tmp_path / "part.jsonl").write_text("\n".join(whole[:4]) + "\n" + whole[4][:15])   # killed while writing row 5
    proc = _annotate(export, tmp_path / "in.jsonl", tmp_path / "part.jsonl", "rows_per_write=3")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "part.jsonl").read_text().splitlines() == whole
    assert f"{len(whole) - 4} rows annotated now, {len(whole)} in all" in proc.stdout


# Settings that change the batches or the kernels: batches of 1, 5 and 12 rows (the default is 8; batch_tokens
# lifted so that batch_size alone sets the batch), annotated in this process by the Annotator the command
# runs, and PyTorch's AVX2 kernels (softmax and attention round differently from AVX-512's), as on another
# CPU, by the command (the kernels are chosen when torch loads). The rows are the short (S) held-out ones:
# what the contract says does not depend on a row's length, and 12 of them make every batching differ (batches
# of 1 read the first ROWS_ALONE: each is its own batch, so more rows repeat the same check).
OTHER_BATCHES = (1, 5, 12)
ROWS_ALONE = 4          # rows annotated in batches of 1, against the first 4 of the default run


def _many_rows(gold_path, out_path, n: int = 12) -> None:
    """The S-bucket held-out rows repeated to n rows (ids made unique), so that a batch of 12 is full."""
    rows = [{"id": r["id"], "source": r["source"], "response": r["response"]}
            for r in map(json.loads, gold_path.read_text(encoding="utf-8").splitlines())
            if r.get("length_bucket") == "S"]
    many = [{**rows[k % len(rows)], "id": f"{rows[k % len(rows)]['id']}#{k}"} for k in range(n)]
    out_path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in many), encoding="utf-8")


@pytest.fixture(scope="module")
def default_annotations(trained, tmp_path_factory):
    """12 rows annotated once with the default batches and kernels: what every other setting is compared with."""
    run, scored = trained
    folder = tmp_path_factory.mktemp("default_annotations")
    _many_rows(scored / "gold.jsonl", folder / "in.jsonl")
    proc = _annotate(run.joinpath(*EXPORT), folder / "in.jsonl", folder / "a.jsonl")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return folder / "in.jsonl", [json.loads(x) for x in (folder / "a.jsonl").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize("setting", [*(f"batches_of_{n}" for n in OTHER_BATCHES), "avx2_kernels", "served"])
def test_another_batch_or_kernel_setting_gives_the_same_annotations_within_tolerance(trained, default_annotations,
                                                                                      tmp_path, setting):
    """The contract across settings (docs/design.md): labels, spans and generated text equal, scores
    within SCORE_ATOL; a label may differ only for a score that close to the decision threshold. A
    generative annotator's greedy answers are the same text in a batch of 32 padded prompts as alone.
    `hallu serve` answers within the same contract."""
    run, _ = trained
    rows, a = default_annotations
    export = run.joinpath(*EXPORT)
    if setting == "avx2_kernels":
        proc = _annotate(export, rows, tmp_path / "b.jsonl", env={"ATEN_CPU_CAPABILITY": "avx2"})
        assert proc.returncode == 0, proc.stderr[-3000:]
        b = [json.loads(x) for x in (tmp_path / "b.jsonl").read_text().splitlines()]
    elif setting == "served":           # `hallu serve`: the 12 rows in one request, batched by the server
        b = served_rows(export, [json.loads(x) for x in rows.read_text(encoding="utf-8").splitlines()])
    else:
        batch = int(setting.rsplit("_", 1)[1])
        annotator = Annotator.load(export, batch_size=batch, batch_tokens=10_000_000)
        given = [json.loads(x) for x in rows.read_text(encoding="utf-8").splitlines()]
        if batch == 1:          # alone, a row's batch is itself: a few rows show it (all 12 took 4 minutes)
            given, a = given[:ROWS_ALONE], a[:ROWS_ALONE]
        b = json.loads(json.dumps(annotator.annotate_rows(given)))       # as the command writes them
    assert len(b) == len(a)
    assert_same_annotations(a, b, AnnotatorSpec.load(export).threshold)


@pytest.mark.slow
def test_unusual_but_valid_text_is_annotated_with_exact_offsets(trained, tmp_path):
    run, _ = trained
    long_source = "林远走进书房，拿起那本旧书。" * 21_500            # about 300,000 characters
    rows = [{"id": "bom", "source": "窗外下着雨。", "response": "窗外下着雨。"},
            {"id": "emoji", "source": "他笑了😀。她也笑了🎉。", "response": "他笑了😀。她哭了🎉。"},
            {"id": "nopunct", "source": "林远走进书房", "response": "林远走进了书房没有标点"},
            {"id": "long", "source": long_source, "response": "林远走进书房。他拿起新书。"}]
    text = "\ufeff" + "\r\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\r\n"
    (tmp_path / "in.jsonl").write_bytes(text.encode("utf-8"))
    proc = _annotate(run.joinpath(*EXPORT), tmp_path / "in.jsonl", tmp_path / "out.jsonl")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [o["id"] for o in out] == [r["id"] for r in rows]
    for o, r in zip(out, rows):
        assert o["label"] in ("hallucinated", "faithful") or o.get("unparseable")
        assert all(r["response"][s["start"]:s["end"]] == s["text"] for s in o["spans"])


@pytest.mark.slow
def test_a_whole_source_annotator_refuses_a_source_over_its_trained_length(trained, tmp_path):
    run, _ = trained
    whole = tmp_path / "whole"
    subprocess.run(["cp", "-r", str(run.joinpath(*EXPORT)), str(whole)], check=True)
    spec = AnnotatorSpec.load(whole)
    spec.evidence_sentences, spec.template, spec.max_seq_len = 0, "prompt_e", 1500      # Prompt-E alone: ~950
    spec.save(whole)
    annotator = Annotator.load(whole)
    with pytest.raises(ValueError, match="row 1: the prompt is .* tokens, over this annotator's trained length "
                                         "max_seq_len=1,500"):
        annotator.annotate("林远走进书房。" * 400, "林远走进书房。")
    assert annotator.annotate("林远走进书房。", "林远走进书房。")["label"] in ("hallucinated", "faithful", None)
    rag = {"context": ["林远走进书房。", "窗外下着雨。"], "question": "林远去了哪里？", "answer": "林远走进书房。"}
    assert all(rag["answer"][s["start"]:s["end"]] == s["text"] for s in annotator.predict(**rag))
    with pytest.raises(ValueError, match=r"output_format='tokens' needs a span \(token\) head"):
        annotator.predict(**rag, output_format="tokens")
    server = Server(whole)                  # `hallu serve` refuses the same row with 413, and serves the next
    try:
        refused = server.post({"source": "林远走进书房。" * 400, "response": "林远走进书房。"})
        assert refused.status_code == 413 and "trained length max_seq_len=1,500" in refused.json()["detail"]
        assert server.post({"source": "林远走进书房。", "response": "林远走进书房。"}).status_code == 200
    finally:
        server.stop()


@pytest.mark.slow
def test_the_cards_transformers_snippet_gives_the_annotators_answer(trained, tmp_path):
    """The card's snippet, pasted as a user would: a sentence-level export's goes through Annotator;
    the same weights exported whole-source render the toolkit's prompt and run plain transformers: a
    binary head's probability equals the annotator's score (within the tolerance contract), a
    generative one's greedy answer, read as eval.annotate reads it, gives the annotator's label and
    spans."""
    run, scored = trained
    export = run.joinpath(*EXPORT)
    whole = tmp_path / "whole"
    subprocess.run(["cp", "-r", str(export), str(whole)], check=True)
    spec = AnnotatorSpec.load(whole)
    spec.evidence_sentences, spec.template, spec.max_seq_len = 0, "prompt_e", 16384
    spec.save(whole)
    write_model_card(whole, spec)
    by_sentence, by_source = Annotator.load(export), Annotator.load(whole)
    for gold in [json.loads(x) for x in (scored / "gold.jsonl").read_text(encoding="utf-8").splitlines()][:2]:
        source, response = gold["source"], gold["response"]
        assert card_snippet(export, source, response, None)["row"] == by_sentence.annotate(source, response)
        row, ran = by_source.annotate(source, response), card_snippet(whole, source, response, None)
        if spec.kind == "generative":
            record = by_source.record({"source": source, "response": response}, "gold", "g")
            read = scorer(spec.scorer).annotation(record, {"output": ran["answer"]})
            assert (read["label"], read["spans"]) == (row["label"], row["spans"])
        else:
            assert abs(ran["p"] - row["score"]) <= SCORE_ATOL and ran["label"] == row["label"]


BAD_INPUTS = [
    ("no_response.jsonl", b'{"id": "a", "source": "x", "response": "y"}\n{"id": "b", "source": "x"}\n',
     "no_response.jsonl:2 field 'response'"),
    ("no_source.jsonl", b'{"id": "a", "response": "y"}\n', "no_source.jsonl:1 field 'source'"),
    ("bad_json.jsonl", b'{"id": "a", "source": "x", "response": "y"}\n{"id": \n', "bad_json.jsonl:2: malformed JSON"),
    ("latin1.jsonl", '{"source": "caf\u00e9", "response": "y"}\n'.encode("latin-1"), "latin1.jsonl:1: not UTF-8"),
    ("empty.jsonl", b"", "the file is empty"),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, content, expected", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_ends_with_one_line_and_keeps_what_was_written(trained, tmp_path, name, content, expected):
    run, _ = trained
    (tmp_path / name).write_bytes(content)
    (tmp_path / "out.jsonl").write_text('{"id": "earlier"}\n')
    proc = _annotate(run.joinpath(*EXPORT), tmp_path / name, tmp_path / "out.jsonl")
    assert proc.returncode == 1 and expected in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 2   # the line, and the hint
    assert (tmp_path / "out.jsonl").read_text() == '{"id": "earlier"}\n'


def test_a_directory_that_is_not_an_export_is_refused_naming_the_file(tmp_path):
    with pytest.raises(ExportError, match=f"{SPEC_FILE} is missing"):
        AnnotatorSpec.load(tmp_path)
    proc = _annotate(tmp_path, tmp_path / "in.jsonl", tmp_path / "out.jsonl")
    assert proc.returncode == 1 and "input=" in proc.stderr          # the input is checked first
    (tmp_path / "in.jsonl").write_text('{"source": "x", "response": "y"}\n')
    proc = _annotate(tmp_path, tmp_path / "in.jsonl", tmp_path / "out.jsonl")
    assert proc.returncode == 1 and f"{SPEC_FILE} is missing" in proc.stderr
    proc = _annotate(tmp_path, tmp_path / "in.jsonl", tmp_path / "missing" / "out.jsonl")
    assert proc.returncode == 1 and "does not exist" in proc.stderr


def test_dtype_loads_the_annotator_in_it_and_moves_scores_by_rounding_only(tmp_path):
    """`dtype=bfloat16` (or `bf16_if_native`: faster where the CPU computes bf16) loads the export in that
    dtype; its span probabilities stay within bf16 rounding of fp32's (the default on a CPU)."""
    import shutil

    import torch
    from transformers import AutoModelForTokenClassification

    from models.annotator import hf_model
    from models.builders import resolve_model_path

    export = tmp_path / "minilm_spans"
    shutil.copytree(resolve_model_path("embedded:minilm"), export)
    torch.manual_seed(0)
    AutoModelForTokenClassification.from_pretrained(export, num_labels=2).save_pretrained(export)   # one head for both
    AnnotatorSpec("spans", "binary", "prompt_e", 0, "spans", "en", 512, 0, ["faithful", "hallucinated"],
                  threshold=0.5).save(export)
    rows = [{"id": "a", "source": "The museum of Lyon opened in 1990 with 120 rooms.",
             "response": "The museum opened in 1990. It has 120 rooms and a garden."}]
    fp32, bf16 = (Annotator.load(export, dtype=d) for d in ("auto", "bfloat16"))
    assert next(hf_model(fp32.predictor.model).parameters()).dtype == torch.float32
    assert next(hf_model(bf16.predictor.model).parameters()).dtype == torch.bfloat16
    a, b = (annotator.predict(rows[0]["source"], rows[0]["response"], output_format="tokens")
            for annotator in (fp32, bf16))
    assert [t["token"] for t in a] == [t["token"] for t in b]
    assert max(abs(x["prob"] - y["prob"]) for x, y in zip(a, b)) < 0.05
    (tmp_path / "in.jsonl").write_text(json.dumps(rows[0]) + "\n")
    done = _annotate(export, tmp_path / "in.jsonl", tmp_path / "out.jsonl", "dtype=bfloat16")
    assert done.returncode == 0 and "model.dtype=bfloat16: bfloat16" in done.stdout, done.stderr[-2000:]
