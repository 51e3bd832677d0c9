"""The grounding-features annotator (eval/baselines/grounding.py, eval.method=grounding): its features on hand-made
records, what it learns on a small synthetic set, `eval/run.py` cross-validating it in one launch (every
record scored once, the fitted model and its thresholds written), and its bad input."""
import json
import math
import random
import subprocess
import sys
from dataclasses import replace

import pytest

from configs.choices import EncoderHead, EvidenceUnit, TokenSpans
from configs.schema import GroundingConfig
from eval.baselines.grounding import (
    SENTENCE_FEATURES,
    GroundingError,
    WordOdds,
    _source_embeddings,
    candidate_config,
    cross_fitted_scores,
    encoder_spans,
    fit,
    gold_sentence_labels,
    sentence_features,
    sentences,
    source_units,
)
from tests.conftest import REPO

CITIES = ["Lyon", "Porto", "Graz", "Turku", "Ghent", "Split", "Brno", "Cork", "Malmo", "Bergen", "Tartu", "Pecs"]
NAMES = ["Okafor", "Lindqvist", "Marchetti", "Dubois", "Novak", "Haddad", "Ferreira", "Kowalski"]


def feature(found, i: int, name: str) -> float:
    return found[i].features[SENTENCE_FEATURES.index(name)]


def test_an_unsupported_number_and_name_are_counted_in_their_own_sentence():
    rec = {"source": "The museum opened in 2001. It holds 40 paintings by Monet.",
           "response": "The museum opened in 1998. It holds 40 paintings by Monet and Degas.", "language": "en"}
    found, context = sentences(rec)
    assert [rec["response"][a:b] for a, b in (s.span for s in found)] == [
        "The museum opened in 1998.", "It holds 40 paintings by Monet and Degas."]
    assert feature(found, 0, "unsupported_numbers") == 1 and feature(found, 0, "unsupported_capitalised") == 0
    assert feature(found, 1, "unsupported_numbers") == 0 and feature(found, 1, "unsupported_capitalised") == 1
    assert feature(found, 0, "unsupported_words") == 1 and feature(found, 1, "unsupported_words") == 1
    assert context[1] == pytest.approx(2 / 8)     # museum opened 1998 holds 40 paintings monet degas: 2 unsupported


def test_chinese_is_read_character_by_character():
    rec = {"source": "张三在北京工作了五年。", "response": "张三在上海工作了五年。", "language": "zh"}
    found, _ = sentences(rec)
    assert len(found) == 1 and feature(found, 0, "unsupported_words") == 2      # 上, 海
    assert feature(found, 0, "unsupported_bigram_share") > 0


def test_with_an_embedder_a_sentence_the_source_says_is_closest_to_it():
    rec = {"id": "e", "source": "The museum opened in 2001. It holds 40 paintings by Monet. Tickets cost ten euros.",
           "response": "It holds 40 paintings by Monet. The chef grilled fresh fish by the harbour.", "language": "en"}
    config = GroundingConfig(embedder="minilm")
    found, _ = sentences(rec, config)
    names = sentence_features(config)
    said, unrelated = (dict(zip(names, s.features)) for s in found)
    assert said["max_similarity"] == pytest.approx(1.0, abs=1e-3) and unrelated["max_similarity"] < 0.5
    assert said["top3_similarity"] < said["max_similarity"]
    twin = {**rec, "id": "e2",
            "response": "The chef grilled fresh fish by the harbour. It holds 40 paintings by Monet."}
    before = _source_embeddings.cache_info()
    found_twin, _ = sentences(twin, config)            # the same source: its units are embedded once
    after = _source_embeddings.cache_info()
    assert (after.hits - before.hits, after.misses - before.misses) == (1, 0)
    assert [s.features[names.index("max_similarity")] for s in found_twin] == pytest.approx(
        [unrelated["max_similarity"], said["max_similarity"]], abs=1e-6)


def test_a_negation_the_closest_source_sentence_lacks_is_counted():
    """"not" is a stopword, so the unsupported-word counts miss an inserted one (SummEdits' negation edits)."""
    rec = {"source": "The council did not approve the budget. The mayor opened the new bridge in May.",
           "response": "The council did not approve the budget. The mayor has not opened the new bridge in May.",
           "language": "en"}
    config = GroundingConfig(negation=True)
    found, _ = sentences(rec, config)
    restated, inserted = (dict(zip(sentence_features(config), s.features)) for s in found)
    assert (restated["negations"], restated["unmatched_negations"]) == (1, 0)
    assert (inserted["negations"], inserted["unmatched_negations"]) == (1, 1)
    assert inserted["unsupported_words"] == 0                  # what the words alone say: nothing new
    zh = {"source": "公司去年提高了价格。", "response": "公司去年没有提高价格。", "language": "zh"}
    (unit,), _ = sentences(zh, config)
    assert unit.features[-1] == 1 and len(sentences(zh)[0][0].features) == len(SENTENCE_FEATURES)


def test_with_stems_an_inflected_source_word_supports_a_response_word():
    rec = {"source": "Three companies said they were hiring engineers in 2021.",
           "response": "A company says it hired an engineer in 2021, Nadia Perrin reports.", "language": "en"}
    (as_written,), _ = sentences(rec)
    (stemmed,), _ = sentences(rec, GroundingConfig(stem=True))
    written, stems = (dict(zip(SENTENCE_FEATURES, s.features)) for s in (as_written, stemmed))
    assert written["unsupported_words"] == 7      # company, says, hired, engineer, nadia, perrin, reports
    assert stems["unsupported_words"] == 4        # says (a stem is no lemma: "said" stays), nadia, perrin, reports
    assert stems["unsupported_capitalised"] == written["unsupported_capitalised"] == 2
    assert stems["unsupported_numbers"] == written["unsupported_numbers"] == 0


def test_a_long_source_line_is_cut_into_pieces_for_the_embedder():
    units = source_units('{"name": "Finch", "hours": "' + "x" * 900 + '"}. Next.', "en")
    assert [len(u) for u in units] == [400, 400, 131, 5]


def test_gold_sentence_labels_follow_the_spans():
    rec = {"source": "s", "response": "One sentence. Two sentence. Three.", "spans": [{"start": 16, "end": 19}]}
    found, _ = sentences(rec)
    assert gold_sentence_labels(rec, found) == [0, 1, 0]


def test_the_unit_encoder_learns_the_spans_or_else_the_label_of_a_hallucinated_response_without_them():
    rec = {"source": "s", "response": "One sentence. Two sentence. Three.", "spans": [{"start": 16, "end": 19}],
           "label": 1, "meta": {"edited_spans": [[4, 12], [28, 33]]}}
    found, _ = sentences(rec)
    plain, edited = GroundingConfig(), GroundingConfig(encoder_edited_spans=True)
    assert encoder_spans(rec, found, plain) == encoder_spans(rec, found, edited) == [[], [(2, 5)], []]
    unlocated = {**rec, "spans": []}                 # SummEdits labels whole summaries: each unit is hallucinated
    assert encoder_spans(unlocated, found, plain) == [[(0, 13)], [(0, 13)], [(0, 6)]]
    assert encoder_spans(unlocated, found, edited) == [[(4, 12)], [], [(0, 5)]]
    assert encoder_spans({**unlocated, "meta": {"edited_spans": []}}, found, edited) == [[(0, 13)], [(0, 13)], [(0, 6)]]
    assert encoder_spans({**unlocated, "label": 0}, found, edited) == [[], [], []]


def synthetic(n: int, seed: int) -> list[dict]:
    """Faithful responses restate the source; hallucinated ones change its year or add a name (the span)."""
    rng, out = random.Random(seed), []
    for i in range(n):
        city, year, count, painter = rng.choice(CITIES), rng.randint(1900, 2000), rng.randint(10, 90), rng.choice(NAMES)
        source = (f"The museum of {city} opened in {year}. It holds {count} paintings by {painter}. "
                  f"Visitors come from across the region every summer.")
        first, second = f"The museum of {city} opened in {year}.", f"It holds {count} paintings by {painter}."
        label, spans = i % 2, []
        if label and i % 4 == 1:
            first = f"The museum of {city} opened in {year + rng.randint(3, 40)}."
            spans = [{"start": first.index("in ") + 3, "end": len(first) - 1}]
        elif label:
            extra = rng.choice([n for n in NAMES if n != painter])
            second = f"It holds {count} paintings by {painter} and {extra}."
            start = len(first) + 1 + second.index(" and ")
            spans = [{"start": start + 5, "end": start + 5 + len(extra)}]
        out.append({"id": f"s{seed}-{i}", "task": "summarization", "language": "en", "source": source,
                    "response": f"{first} {second}", "label": label, "spans": spans,
                    "meta": {"source_id": f"{seed}-{i}", "task_type": "Summary"}})
    return out


def test_it_learns_what_the_source_does_not_say_and_marks_that_sentence():
    model = fit(synthetic(80, 0))
    test = synthetic(40, 1)
    rows = [model.predict(r) for r in test]
    assert sum(row["label"] == r["label"] for row, r in zip(rows, test)) >= 36
    for row, rec in zip(rows, test):
        for start, end in row["spans"]:
            assert any(s["start"] < end and s["end"] > start for s in rec["spans"]), (rec["response"], row["spans"])
    assert any(row["spans"] for row in rows)


def test_without_gold_spans_it_decides_responses_and_marks_no_spans():
    train = [{**r, "spans": []} for r in synthetic(40, 0)]
    model = fit(train)
    row = model.predict(synthetic(2, 1)[1])
    assert model.sentence is None and row["spans"] == [] and row["per_unit"] == []


def test_when_every_training_record_is_hallucinated_the_marked_spans_decide():
    """UHGEval: every continuation is hallucinated somewhere; only the units can be learnt."""
    model = fit([r for r in synthetic(120, 0) if r["label"]], GroundingConfig(unit=EvidenceUnit.clause))
    rows = [(model.predict(r), r) for r in synthetic(40, 1)]
    assert model.response is None and all(row["label"] == int(bool(row["spans"])) for row, _ in rows)
    assert sum(row["label"] == r["label"] for row, r in rows) >= 32


PEOPLE = ["Ann", "Mike", "Ravi", "Lena", "Tomas", "Ines", "Yuki", "Omar", "Petra", "Karl"]
FOODS = ["butter", "bread", "rice", "cheese", "apples", "coffee", "honey", "flour", "pasta", "lemons"]
PARAPHRASES = ["requests", "tells", "reminds", "urges", "wants", "begs"]
NEW_THINGS = ["ghee", "margarine", "caviar", "truffles", "saffron", "oysters"]


def edits(n: int, seed: int) -> list[dict]:
    """SummEdits in small: a faithful edit swaps "asks" for a paraphrase the source never uses, an unfaithful
    one swaps the food for one it never mentions. One unsupported word in the same place either way: the
    counts are the same, only the word differs."""
    rng, out = random.Random(seed), []
    for i in range(n):
        a, b = rng.sample(PEOPLE, 2)
        food, label = rng.choice(FOODS), i % 2
        source = f"On day {seed}-{i}, {a} asks {b} to buy {food} at the market. {b} agrees."
        verb, said = (("asks", rng.choice(NEW_THINGS)) if label else (rng.choice(PARAPHRASES), food))
        out.append({"id": f"e{seed}-{i}", "task": "summarization", "language": "en", "source": source,
                    "response": f"{a} {verb} {b} to buy {said} at the market.", "label": label, "spans": [],
                    "meta": {"task_type": "Summary"}})
    return out


def test_word_odds_tell_a_paraphrase_from_a_new_thing_where_the_counts_cannot(tmp_path):
    train, test = edits(120, 0), edits(60, 1)

    def accuracy(model) -> float:
        return sum(model.predict(r)["label"] == r["label"] for r in test) / len(test)

    assert accuracy(fit(train)) <= 0.65
    model = fit(train, GroundingConfig(word_odds=True))
    assert accuracy(model) >= 0.9
    model.save(tmp_path / "grounding.json", {})
    saved = json.loads((tmp_path / "grounding.json").read_text())
    assert "max_unsupported_log_odds_sum" in saved["response"]["features"]
    assert set(saved["word_odds"]["hallucinated"]) == {"ghee", "margarine", "caviar", "truffles", "saffron", "oysters"}


def test_a_training_response_reads_word_odds_without_its_own_source():
    """A word only one training source's responses use tells its own responses nothing: a test response
    never has its own source in the table."""
    train = edits(40, 0)
    said = train[1]["response"].rsplit(" ", 4)[0]          # "... to buy", its food left out
    lonely = {**train[1], "id": "lonely", "response": f"{said} kumquats at the market."}
    odds, held = WordOdds.fit([*train, lonely], GroundingConfig())
    own = held[WordOdds.source_of(lonely)]
    assert odds.log_odds("kumquats") > 0.5
    assert odds.log_odds("kumquats", own) == pytest.approx(odds.log_odds("never-used", own))
    assert odds.log_odds("ghee", own) > 0.5


def _domain(records: list[dict], name: str) -> list[dict]:
    return [{**r, "id": f"{name}-{r['id']}", "meta": {**r["meta"], "domain": name}} for r in records]


def test_cross_fitted_scores_come_from_a_model_that_never_saw_the_records_domain():
    config = GroundingConfig(word_odds=True)
    news, chat, talk = _domain(edits(40, 0), "news"), _domain(edits(40, 1), "chat"), _domain(edits(40, 2), "talk")
    scored = cross_fitted_scores(news + chat + talk, config, "meta.domain")
    assert set(scored) == {r["id"] for r in news + chat + talk}
    unseen, everything = fit(news + talk, config), fit(news + chat + talk, config)
    for rec in chat[:4]:
        assert scored[rec["id"]][0] == pytest.approx(unseen.scores(rec)[0])
        assert scored[rec["id"]][0] != pytest.approx(everything.scores(rec)[0])
    with pytest.raises(GroundingError, match=r"cross_fit_by=meta.domain: record 'e9-0' has no meta.domain"):
        cross_fitted_scores(news + edits(1, 9), config, "meta.domain")
    with pytest.raises(GroundingError, match=r"at least 2 values of meta.domain, found \['news'\]"):
        cross_fitted_scores(news, config, "meta.domain")


def test_with_cross_fit_by_the_threshold_is_chosen_on_both_splits_cross_fitted(tmp_path):
    from eval.predictors import GroundingPredictor, Inference
    from eval.thresholds import choose_threshold

    config = GroundingConfig(word_odds=True, cross_fit_by="meta.domain")
    train, val = _domain(edits(40, 0), "news") + _domain(edits(40, 1), "chat"), _domain(edits(20, 2), "talk")
    predictor = GroundingPredictor(config, Inference())
    predictor.prepare({"train": train, "val": val}, tmp_path)
    both = train + val
    scored = cross_fitted_scores(both, config, "meta.domain")
    assert predictor.model.threshold == pytest.approx(
        choose_threshold([r["label"] for r in both], [scored[r["id"]][0] for r in both]))
    saved = json.loads((tmp_path / "grounding.json").read_text())
    assert saved["train_records"] == 100
    assert saved["threshold_source"] == "train and val splits cross-fitted by meta.domain, 100 responses"


def test_leave_one_domain_out_with_cross_fitted_thresholds_in_one_launch(tmp_path):
    """+exp=summedits_grounding as a user runs it: each fold's threshold chosen on its two training domains
    cross-fitted, shown beside the fold's row; the published systems stay in each fold's own report."""
    records = [r for i, name in enumerate(("news", "samsum", "scitldr")) for r in _domain(edits(40, i), name)]
    data = tmp_path / "data"
    data.mkdir()
    (data / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    done = _run("+exp=summedits_grounding", f"data.root={data}", "data.folds=3", f"output_dir={tmp_path / 'run'}",
                "eval.grounding.word_odds=true", "eval.grounding.cross_fit_by=meta.domain")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    pooled = json.loads((tmp_path / "run" / "eval" / "metrics.json").read_text())
    assert pooled["n"] == 120 and pooled["balanced_acc"] > 0.85
    saved = json.loads((tmp_path / "run" / "fold_0" / "eval" / "grounding.json").read_text())
    assert saved["threshold_source"] == "train and val splits cross-fitted by meta.domain, 80 responses"
    per_fold = (tmp_path / "run" / "eval" / "report.md").read_text().split("## Per fold")[1]
    assert f"| 0 | {saved['threshold']:.3f} |" in per_fold and "SummaCConv" not in per_fold


def test_choose_among_uses_the_features_that_rank_the_folds_own_records_best(tmp_path):
    """The choice is made on the fold's train and val parts, cross-fitted over groups of sources: the word
    odds rank SummEdits-like edits far better than the counts, and the fold's model then uses them."""
    from eval.predictors import GroundingPredictor, Inference

    config = GroundingConfig(choose_among=["plain", "stem", "word_odds"])
    predictor = GroundingPredictor(config, Inference())
    predictor.prepare({"train": edits(80, 0), "val": edits(20, 1)}, tmp_path)
    assert predictor.grounding.word_odds and not predictor.grounding.stem and predictor.model.word_odds
    chosen = json.loads((tmp_path / "grounding.json").read_text())["features_chosen"]
    assert (chosen["chosen"], chosen["inner_folds"], chosen["by"]) == ("word_odds", 5, "source")
    assert chosen["roc_auc"]["word_odds"] > 0.9 > max(chosen["roc_auc"]["plain"], chosen["roc_auc"]["stem"])
    assert candidate_config(GroundingConfig(stem=True), "plain") == GroundingConfig()
    with pytest.raises(GroundingError, match=r"'stem\+lemma' names \['lemma'\]; expected flags among"):
        candidate_config(GroundingConfig(), "stem+lemma")


def _task_type(records: list[dict], name: str) -> list[dict]:
    return [{**r, "id": f"{name}-{r['id']}", "meta": {**r["meta"], "task_type": name}} for r in records]


def test_a_threshold_per_task_type_chosen_for_f1_flags_a_type_it_cannot_separate_whole(tmp_path):
    """RAGTruth reports F1 per task type: where a type's hallucinated responses look like its faithful
    ones (labels that its words do not show), the F1 threshold of that type flags every response of it,
    while a type it separates keeps a threshold between its classes."""
    from eval.predictors import GroundingPredictor, Inference

    separable = _task_type(synthetic(40, 2), "Summary")
    restated = synthetic(1, 3)[0]        # one faithful response, 40 times: its labels cannot be told apart
    hidden = _task_type([{**restated, "id": f"h{i}", "label": int(i % 4 != 0)} for i in range(40)], "Data2txt")
    predictor = GroundingPredictor(GroundingConfig(), Inference(threshold_by="meta.task_type", threshold_for="f1"))
    predictor.prepare({"train": synthetic(80, 0), "val": separable + hidden}, tmp_path)
    model = predictor.model
    by = model.thresholds_by["values"]
    assert model.thresholds_by["field"] == "meta.task_type" and set(by) == {"Summary", "Data2txt"}
    assert all(model.predict(r)["label"] for r in hidden) and by["Data2txt"] < by["Summary"]
    assert sum(model.predict(r)["label"] == r["label"] for r in separable) >= 36
    as_data2txt, as_summary = (model.predict(*_task_type([restated], name)) for name in ("Data2txt", "Summary"))
    assert (as_data2txt["label"], as_data2txt["threshold"]) == (1, by["Data2txt"])
    assert (as_summary["label"], as_summary["threshold"]) == (0, by["Summary"])
    saved = json.loads((tmp_path / "grounding.json").read_text())
    assert saved["thresholds_by"] == model.thresholds_by and "for F1" in saved["threshold_source"]


def test_a_response_model_per_task_type_fits_a_type_whose_features_point_the_other_way(tmp_path):
    """`response_by_task`: each task type with both labels gets its own response regression, the pooled one
    scores any other type, and grounding.json keeps them. Here the "Data2txt" labels are the "Summary" ones
    turned over, which one model with the task type as a feature cannot fit."""
    from sklearn.metrics import roc_auc_score

    from eval.baselines.grounding import GroundingModel

    def turned(records, name):
        return [{**r, "label": 1 - r["label"], "spans": []} for r in _task_type(records, name)]

    train = _task_type(synthetic(80, 0), "Summary") + turned(synthetic(80, 1), "Data2txt")
    test = turned(synthetic(40, 2), "Data2txt")
    pooled, by_task = fit(train), fit(train, replace(GroundingConfig(), response_by_task=True))
    assert pooled.task_responses is None and set(by_task.task_responses) == {"Summary", "Data2txt"}
    labels = [r["label"] for r in test]
    assert roc_auc_score(labels, [by_task.scores(r)[0] for r in test]) > 0.9
    assert roc_auc_score(labels, [pooled.scores(r)[0] for r in test]) < 0.7
    other = _task_type(synthetic(1, 3), "QA")[0]
    row = by_task.sentence_matrix(other)[2]
    assert by_task.scores(other)[0] == pytest.approx(by_task.response.probability(row[None])[0])
    by_task.save(tmp_path / "grounding.json", {})
    loaded = GroundingModel.load(tmp_path / "grounding.json")
    assert loaded.config.response_by_task and set(loaded.task_responses) == {"Summary", "Data2txt"}
    assert [loaded.scores(r)[0] for r in test + [other]] == [by_task.scores(r)[0] for r in test + [other]]


def test_one_class_in_the_train_split_is_refused():
    with pytest.raises(GroundingError, match=r"or gold spans; found labels \[0\] in 10 records and no span"):
        fit([r for r in synthetic(20, 0) if r["label"] == 0])


def _run(*overrides, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "eval/run.py", *overrides], capture_output=True, text=True, cwd=REPO,
                          timeout=timeout)


def cross_validate(tmp_path, records: list[dict], *overrides, timeout: int = 300) -> subprocess.CompletedProcess:
    """`eval/run.py +exp=ragtruth_grounding` (3 folds) on `records`, into tmp_path/run."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return _run("+exp=ragtruth_grounding", f"data.root={data}", f"output_dir={tmp_path / 'run'}", *overrides,
                timeout=timeout)


def test_eval_run_cross_validates_it_in_one_launch(tmp_path):
    records = synthetic(240, 0)
    out = tmp_path / "run"
    done = cross_validate(tmp_path, records)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    predicted = [json.loads(line)["id"] for i in range(3)
                 for line in (out / f"fold_{i}" / "eval" / "predictions.jsonl").read_text().splitlines()]
    assert sorted(predicted) == sorted(r["id"] for r in records)          # every record once
    metrics = json.loads((out / "eval" / "metrics.json").read_text())
    assert metrics["n"] == 240 and metrics["example"]["balanced_acc"] > 0.85 and metrics["char"]["f1"] > 0.2
    saved = json.loads((out / "fold_0" / "eval" / "grounding.json").read_text())
    assert saved["threshold_source"].startswith("validation split") and "character F1" in saved["span_threshold_source"]
    assert len(saved["sentence"]["weights"]) == len(saved["sentence"]["features"])
    assert "folds pooled" in done.stdout


def test_the_encoders_twins_come_from_their_own_half_and_mark_the_edited_unit():
    from eval.baselines.grounding import GroundingError, encoder_twins

    part, elsewhere = synthetic(20, 0), synthetic(20, 1)
    config = GroundingConfig(encoder="embedded:minilm", encoder_twins=1)
    twins = encoder_twins(part, config, 0)
    faithful = {r["id"]: r for r in part if r["label"] == 0}
    assert len(twins) == len(faithful) and {t["meta"]["twin_of"] for t in twins} == set(faithful)
    assert {t["source"] for t in twins} <= {r["source"] for r in part}
    assert not {t["source"] for t in twins} & {r["source"] for r in elsewhere}
    assert {t["meta"]["edit"] for t in twins} <= {"numerical", "temporal", "entity", "logical_inversion"}
    for twin in twins:
        found = sentences(twin, config)[0]
        original = faithful[twin["meta"]["twin_of"]]
        assert sum(map(bool, encoder_spans(twin, found, config))) == 1 and twin["response"] != original["response"]
    assert encoder_twins(part, GroundingConfig(encoder="embedded:minilm"), 0) == []
    with pytest.raises(GroundingError, match="encoder_twin_edits: expected some of numerical"):
        encoder_twins(part, GroundingConfig(encoder="embedded:minilm", encoder_twins=1, encoder_twin_edits=["typo"]), 0)


def test_eval_run_refuses_grounding_on_built_records_and_folds_for_an_annotator(tmp_path):
    done = _run("+exp=longnovel_curriculum_demo", "eval.method=grounding", f"output_dir={tmp_path / 'a'}")
    assert done.returncode != 0 and "needs data.source=records, found data.source=embedded" in done.stderr
    assert "Traceback" not in done.stderr
    done = _run("+exp=ragtruth_grounding", "eval.method=annotator", f"data.root={tmp_path}",
                f"output_dir={tmp_path / 'b'}")
    assert done.returncode != 0 and "a fold's export is scored with data.folds=0" in done.stderr


def test_with_an_encoder_a_training_unit_reads_the_encoder_that_never_saw_its_source(tiny_unit_encoder, tmp_path,
                                                                                     capsys):
    from data_builders.folds import source_key
    from eval.baselines.grounding import ENCODER_FEATURES, GroundingModel, fit_unit_encoders, source_halves, unit_pairs
    from models.unit_encoder import unit_logits

    config = GroundingConfig(encoder=str(tiny_unit_encoder), encoder_epochs=2.0, encoder_lr=1e-3)
    train = synthetic(24, 0)
    encoders, held_out = fit_unit_encoders(train, config, tmp_path / "checkpoints")
    assert sorted(d.name for d in (tmp_path / "checkpoints").iterdir()) == ["encoder_1", "encoder_2"]
    capsys.readouterr()
    assert fit_unit_encoders(train, config, tmp_path / "checkpoints")[1] == held_out   # read back, not fitted again
    assert capsys.readouterr().out.count("finished by an earlier run") == 2
    halves = source_halves(train)
    assert len(encoders) == 2 and set(held_out) == {r["id"] for r in train} and all(halves)
    for rec in train:
        unseen = encoders[0 if source_key(rec) in halves[1] else 1]
        assert held_out[rec["id"]] == unit_logits([unseen], unit_pairs(rec, config))
    seen_by_one = unit_logits([encoders[0]], unit_pairs(train[0], config))
    assert seen_by_one != unit_logits([encoders[1]], unit_pairs(train[0], config))     # two different fits

    model = fit(train, config)
    assert model.feature_names()["sentence"][len(SENTENCE_FEATURES)] == ENCODER_FEATURES[0]
    assert model.held_out_logits is None                      # a fitted model reads new records with both encoders
    test = synthetic(8, 1)
    means = [sum(pair) / 2 for pair in zip(*(unit_logits([e], unit_pairs(test[0], config)) for e in model.encoders))]
    assert model._encoder_logits(test[0]) == pytest.approx(means, abs=1e-6)
    model.save(tmp_path / "grounding.json", {})
    again = GroundingModel.load(tmp_path / "grounding.json")
    assert [again.scores(r) for r in test] == [model.scores(r) for r in test]
    assert sum(model.predict(r)["label"] == r["label"] for r in test) >= 6


def test_encoders_fitted_by_another_run_are_read_as_they_are_on_every_unit(tiny_unit_encoder, tmp_path, capsys):
    from data_builders.folds import source_key
    from eval.baselines.grounding import GroundingModel, fitted_encoder_config, read_fitted_encoders, unit_pairs
    from models.unit_encoder import unit_logits

    elsewhere = fit(synthetic(24, 0), GroundingConfig(encoder=str(tiny_unit_encoder), encoder_epochs=2.0,
                                                      encoder_lr=1e-3, encoder_max_len=96))
    (tmp_path / "other").mkdir()
    elsewhere.save(tmp_path / "other" / "grounding.json", {})
    config = fitted_encoder_config(GroundingConfig(encoder_fitted=str(tmp_path / "other"), word_odds=True))
    assert (config.encoder, config.encoder_epochs, config.encoder_max_len) == (str(tiny_unit_encoder), 2.0, 96)

    train = synthetic(24, 1)
    encoders, logits = read_fitted_encoders(train, config)
    for rec in train[:3]:
        mean = [sum(p) / 2 for p in zip(*(unit_logits([e], unit_pairs(rec, config)) for e in elsewhere.encoders))]
        assert logits[rec["id"]] == pytest.approx(mean, abs=1e-6)       # both encoders, neither trained again
    assert "their units' logits: 24/24" in capsys.readouterr().err
    assert read_fitted_encoders(train, config)[1] == logits
    assert "their units' logits" not in capsys.readouterr().err     # a launch's later folds read none again
    halves = [set(e.sources) for e in elsewhere.encoders]
    assert all(halves) and not halves[0] & halves[1]
    for rec in synthetic(24, 0)[:4]:    # what the other run fine-tuned on: read by the encoder that never saw it
        unseen = elsewhere.encoders[0 if source_key(rec) in halves[1] else 1]
        assert read_fitted_encoders([rec], config)[1][rec["id"]] == pytest.approx(
            unit_logits([unseen], unit_pairs(rec, config)), abs=1e-6)
    model = fit(train, config)
    test = synthetic(8, 2)
    assert [model.scores(r) for r in test] != [fit(train, replace(config, encoder=None)).scores(r) for r in test]
    model.save(tmp_path / "grounding.json", {})
    assert "read as fitted in" in json.loads((tmp_path / "grounding.json").read_text())["encoder"]["fitted"]
    assert [GroundingModel.load(tmp_path / "grounding.json").scores(r) for r in test] == [model.scores(r) for r in test]

    with pytest.raises(GroundingError, match="expected a grounding run's fold directory .* found no"):
        fitted_encoder_config(GroundingConfig(encoder_fitted=str(tmp_path / "nothing")))
    (tmp_path / "plain").mkdir()
    fit(train, GroundingConfig()).save(tmp_path / "plain" / "grounding.json", {})
    with pytest.raises(GroundingError, match="reads no unit encoder"):
        fitted_encoder_config(GroundingConfig(encoder_fitted=str(tmp_path / "plain")))
    with pytest.raises(GroundingError, match="its encoders have a unit head, and eval.grounding's "
                                             "encoder_token_spans=anywhere marks the tokens a token head marks"):
        fitted_encoder_config(GroundingConfig(encoder_fitted=str(tmp_path / "other"),
                                              encoder_token_spans=TokenSpans.anywhere))


def test_encoders_fitted_elsewhere_go_on_from_their_weights_on_the_sources_neither_saw(tiny_unit_encoder, tmp_path):
    from data_builders.folds import source_key
    from eval.baselines.grounding import continued_encoder_config, fit_unit_encoders, held_out_readers, unit_pairs
    from models.unit_encoder import unit_logits

    elsewhere = fit(synthetic(24, 0), GroundingConfig(encoder=str(tiny_unit_encoder), encoder_epochs=2.0,
                                                      encoder_lr=1e-3, encoder_max_len=96))
    (tmp_path / "other").mkdir()
    elsewhere.save(tmp_path / "other" / "grounding.json", {})
    config = continued_encoder_config(GroundingConfig(encoder_from=str(tmp_path / "other"), encoder_lr=0.0,
                                                      encoder_patience=1))
    assert (config.encoder, config.encoder_max_len, config.encoder_epochs) == (str(tiny_unit_encoder), 96, 1.0)
    seen, own = synthetic(24, 0)[:8], synthetic(24, 1)
    encoders, held_out = fit_unit_encoders(own + seen, config, tmp_path / "checkpoints")
    for start, encoder in zip(elsewhere.encoders, encoders):     # at lr 0 each is its start: weights and head
        assert unit_logits([encoder], unit_pairs(own[0], config)) == pytest.approx(
            unit_logits([start], unit_pairs(own[0], config)), abs=1e-5)
        assert set(start.sources) < set(encoder.sources)
        (started, first), (one, after) = encoder.curve    # the start read as epoch 0, kept unless an epoch beats it
        assert (started, one) == (0.0, 1.0) and first == pytest.approx(after, abs=1e-6)
    trained_on = [set(e.sources) - set(s.sources) for s, e in zip(elsewhere.encoders, encoders)]
    assert trained_on[0] | trained_on[1] == {source_key(r) for r in own} and not trained_on[0] & trained_on[1]
    readers = held_out_readers(own + seen, config, encoders)
    for rec in own + seen:
        unseen = [e for e in encoders if source_key(rec) not in e.sources]
        assert len(unseen) == 1 and readers[rec["id"]] == unseen
        assert held_out[rec["id"]] == unit_logits(unseen, unit_pairs(rec, config))
    model = fit(own + seen, config, (encoders, held_out))
    model.save(tmp_path / "grounding.json", {})
    saved = json.loads((tmp_path / "grounding.json").read_text())["encoder"]
    assert saved["continued_from"] == str(tmp_path / "other") and "went on fine-tuning" in saved["fitted"]

    learning = replace(config, encoder_lr=1e-3, encoder_patience=None)
    moved = fit_unit_encoders(own, learning, tmp_path / "learning")[0][0]
    assert unit_logits([moved], unit_pairs(own[0], config)) != pytest.approx(
        unit_logits([elsewhere.encoders[0]], unit_pairs(own[0], config)), abs=1e-5)
    with pytest.raises(GroundingError, match="encoder_from goes on training the head they have"):
        continued_encoder_config(replace(learning, encoder_from=str(tmp_path / "other"),
                                         encoder_head=EncoderHead.token))
    with pytest.raises(GroundingError, match=r"\(eval.grounding.encoder_from\): expected a grounding run's"):
        continued_encoder_config(GroundingConfig(encoder_from=str(tmp_path / "nothing")))


def test_with_patience_each_encoder_stops_on_the_other_halfs_units_and_the_report_shows_its_curve(
        tiny_unit_encoder, tmp_path, monkeypatch):
    import eval.baselines.grounding as grounding
    from data_builders.folds import source_key

    read = {}
    examples = grounding.encoder_examples

    def recording(records, config, desc):
        read[desc] = {source_key(r) for r in records}
        return examples(records, config, desc)

    monkeypatch.setattr(grounding, "encoder_examples", recording)
    config = GroundingConfig(encoder=str(tiny_unit_encoder), encoder_epochs=3.0, encoder_lr=1e-3, encoder_patience=1)
    train = synthetic(24, 0)
    model = fit(train, config)
    for i, half in enumerate(grounding.source_halves(train)):
        trained, stopped_on = (read[f"unit encoder {i + 1} of 2: {what}"] for what in ("its units and their evidence",
                                                                                          "early stopping's units"))
        assert trained <= half and stopped_on and not stopped_on & half
    for curve in (e.curve for e in model.encoders):
        figures = [figure for _, figure in curve]
        assert len(figures) in (3, figures.index(max(figures)) + 2) and all(0 <= f <= 1 for f in figures)
    model.save(tmp_path / "grounding.json", {})
    saved = json.loads((tmp_path / "grounding.json").read_text())["encoder"]
    assert saved["patience"] == 1 and saved["curves"] == [[list(point) for point in e.curve] for e in model.encoders]
    assert grounding.GroundingModel.load(tmp_path / "grounding.json").config.encoder_patience == 1

    run = tmp_path / "run"                 # as fold 1 of a cross-validated run whose fold 0 fitted no encoder
    (run / "eval").mkdir(parents=True)
    (run / "eval" / "report.md").write_text("# pooled\n")
    (run / "fold_1" / "eval").mkdir(parents=True)
    (run / "fold_1" / "eval" / "grounding.json").write_text((tmp_path / "grounding.json").read_text())
    from eval.harness import _add_encoder_curves

    _add_encoder_curves(run, 2)
    rows = [line.split(" | ") for line in (run / "eval" / "report.md").read_text().split("## Unit encoders")[1]
            .splitlines() if line.startswith("| 1 |")]
    assert [k for _, k, _ in rows] == ["1", "2"]
    for (_, _, points), curve in zip(rows, saved["curves"]):
        assert points.count("**") == 2 and f"**{max(f for _, f in curve):.3f}**" in points
        assert points.count(":") == len(curve) and points.startswith("1: ")


def test_token_spans_are_the_tokens_its_head_marks_in_the_marked_units_or_anywhere(tiny_unit_encoder, tmp_path):
    from dataclasses import replace

    from eval.baselines.grounding import GroundingModel, unit_pairs
    from models.unit_encoder import token_readings

    config = GroundingConfig(encoder=str(tiny_unit_encoder), encoder_epochs=2.0, encoder_lr=1e-3,
                             encoder_head=EncoderHead.token,
                             encoder_token_spans=TokenSpans.in_marked_units)
    model = fit(synthetic(24, 0), config)
    model.save(tmp_path / "grounding.json", {})
    model = GroundingModel.load(tmp_path / "grounding.json")
    whole, anywhere = (replace(model, config=replace(model.config, encoder_token_spans=how))
                       for how in (TokenSpans.whole_units, TokenSpans.anywhere))
    narrowed = 0
    for rec in synthetic(16, 1):
        row, by_units, everywhere = model.predict(rec), whole.predict(rec), anywhere.predict(rec)
        assert row["label"] == by_units["label"] and row["score"] == by_units["score"]
        marked = [(a, b) for a, b in by_units["spans"]]
        assert all(any(a <= s and e <= b for a, b in marked) for s, e in row["spans"])
        tokens = [(s + a, s + b) for (s, _, q), toks in zip(row["per_unit"], token_readings(model.encoders,
                  unit_pairs(rec, model.config))[1]) if q >= model.span_threshold for a, b, logit in toks if logit > 0]
        assert {c for s, e in row["spans"] for c in range(s, e)} >= {c for s, e in tokens for c in range(s, e)}
        assert all(s in {a for a, _ in tokens} and e in {b for _, b in tokens} for s, e in row["spans"])
        covered = {c for s, e in everywhere["spans"] for c in range(s, e)}
        assert everywhere["label"] == row["label"] and covered >= {c for s, e in row["spans"] for c in range(s, e)}
        strict = replace(anywhere, token_threshold=0.9).predict(rec)["spans"]     # a higher token threshold
        assert {c for s, e in strict for c in range(s, e)} <= covered
        units = [s.span for s in sentences(rec, model.config)[0]]
        assert all(any(a <= s and e <= b for a, b in units) for s, e in strict)   # a span never joins two units
        narrowed += row["spans"] != by_units["spans"]
    assert model.config.encoder_token_spans == TokenSpans.in_marked_units and narrowed
    rec, first = synthetic(16, 1)[0], [model.encoders[0]]        # tokens read by one encoder (cross-fitted thresholds)
    per_unit = model.predict(rec)["per_unit"]
    alone = [1 / (1 + math.exp(-logit)) for toks in token_readings(first, unit_pairs(rec, model.config))[1]
             for *_, logit in toks]
    assert [p for run in anywhere.token_runs(rec, per_unit, first) for *_, p in run] == pytest.approx(alone, abs=1e-9)
    assert [p for run in anywhere.token_runs(rec, per_unit) for *_, p in run] != pytest.approx(alone, abs=1e-6)


def test_without_gold_spans_anywhere_reads_the_token_head_on_every_unit(tiny_unit_encoder):
    """SummEdits: no gold spans, so no unit model; the token head, trained on the edited words, still marks spans."""
    from dataclasses import replace

    from eval.baselines.grounding import unit_pairs
    from models.unit_encoder import token_readings

    train = [{**r, "spans": [], "meta": {**r["meta"], "edited_spans": [[s["start"], s["end"]] for s in r["spans"]]}}
             for r in synthetic(24, 0)]
    config = GroundingConfig(encoder=str(tiny_unit_encoder), encoder_epochs=2.0, encoder_lr=1e-3,
                             encoder_head=EncoderHead.token, encoder_edited_spans=True,
                             encoder_token_spans=TokenSpans.in_marked_units)
    with pytest.raises(GroundingError, match="none of the 24 training records has a gold span, and .*=in_marked_units"):
        fit(train, config)
    model = fit(train, replace(config, encoder_token_spans=TokenSpans.anywhere))
    assert model.sentence is None
    marked = 0
    for rec in synthetic(16, 1):
        row = model.predict(rec)
        if not row["label"]:
            assert row["spans"] == []
            continue
        units, readings = sentences(rec, model.config)[0], token_readings(model.encoders, unit_pairs(rec, config))[1]
        tokens = {unit.span[0] + c for unit, toks in zip(units, readings) for a, b, logit in toks if logit > 0
                  for c in range(a, b)}
        covered = {c for s, e in row["spans"] for c in range(s, e)}
        assert covered >= tokens and (covered <= tokens | {c for c in covered if rec["response"][c] == " "})
        marked += bool(row["spans"])
    assert marked


def test_with_an_encoder_cross_fit_by_fits_two_encoders_on_halves_of_the_domains(tiny_unit_encoder, tmp_path,
                                                                                  monkeypatch):
    """A training unit's logit comes from the encoder that never saw its domain, as a left-out domain's does, and
    the inner fits that choose the threshold refit the regressions only."""
    from dataclasses import replace

    import models.unit_encoder
    from eval.baselines.grounding import GroundingModel, encoder_parts, fit_unit_encoders, held_out_readers, unit_pairs
    from eval.predictors import GroundingPredictor, Inference
    from models.unit_encoder import unit_logits

    config = GroundingConfig(encoder=str(tiny_unit_encoder), encoder_lr=1e-3, cross_fit_by="meta.domain")
    records = [r for i, name in enumerate(("news", "chat", "talk")) for r in _domain(synthetic(12, i), name)]
    domains = [{r["meta"]["domain"] for r in part} for part in encoder_parts(records, config)]
    assert domains == [{"chat", "talk"}, {"news"}]
    encoders = fit_unit_encoders(records, config)
    scored = cross_fitted_scores(records, config, "meta.domain", encoders)
    readers = held_out_readers(records, config, encoders[0])          # what reads its tokens for a token threshold
    for rec in records[::5]:
        unseen = encoders[0][0 if rec["meta"]["domain"] in domains[1] else 1]
        assert encoders[1][rec["id"]] == unit_logits([unseen], unit_pairs(rec, config))
        assert readers[rec["id"]] == [unseen]
        inner = fit([r for r in records if r["meta"]["domain"] != rec["meta"]["domain"]], config, encoders)
        inner.held_out_logits = encoders[1]
        assert scored[rec["id"]][0] == pytest.approx(inner.scores(rec)[0])

    fitted = []
    real = models.unit_encoder.fit_unit_encoder
    monkeypatch.setattr(models.unit_encoder, "fit_unit_encoder", lambda *a, **k: fitted.append(1) or real(*a, **k))
    predictor = GroundingPredictor(config, Inference())
    predictor.prepare({"train": records[:24], "val": records[24:]}, tmp_path)
    saved = json.loads((tmp_path / "grounding.json").read_text())
    assert len(fitted) == 2 and len(predictor.model.encoders) == 2
    assert saved["encoder"]["fitted"].startswith("each on the units of half the train values of meta.domain;")
    assert saved["threshold_source"] == "train and val splits cross-fitted by meta.domain, 36 responses"
    with pytest.raises(GroundingError, match=r"halves of its values: found \['news'\]"):
        fit_unit_encoders(records[:12], config)

    read_by = []                                  # a token threshold chosen on them reads each by its unseen encoder
    runs = GroundingModel.token_runs
    monkeypatch.setattr(GroundingModel, "token_runs",
                        lambda self, rec, per_unit, encoders=None: read_by.append(encoders) or runs(self, rec, per_unit,
                                                                                                      encoders))
    token = replace(config, encoder_head=EncoderHead.token, encoder_token_spans=TokenSpans.in_marked_units,
                    encoder_token_threshold=None)
    GroundingPredictor(token, Inference()).prepare({"train": records[:24], "val": records[24:]}, tmp_path / "token")
    assert read_by and all(encoders is not None and len(encoders) == 1 for encoders in read_by)


def test_choose_among_beside_an_encoder_fine_tunes_it_once_and_every_candidate_reads_its_held_out_logits(
        tiny_unit_encoder, tmp_path, monkeypatch):
    """The fold's two encoders are fitted before the choice and shared by every candidate's inner fits, in which
    a record reads the encoder that never saw its source; the fold's model then reads the same two."""
    import models.unit_encoder
    from eval.baselines.grounding import ENCODER_FEATURES, choose_features
    from eval.predictors import GroundingPredictor, Inference

    fitted = []
    real = models.unit_encoder.fit_unit_encoder
    monkeypatch.setattr(models.unit_encoder, "fit_unit_encoder", lambda *a, **k: fitted.append(1) or real(*a, **k))
    config = GroundingConfig(encoder=str(tiny_unit_encoder), encoder_lr=1e-3, choose_among=["plain", "word_odds"],
                             choose_folds=3)
    flipped = [{**r, "label": 1 - r["label"], "spans": []} if i % 5 == 0 else r       # labels no feature separates
               for i, r in enumerate(synthetic(40, 0))]
    splits = {"train": flipped[:30], "val": flipped[30:]}
    predictor = GroundingPredictor(config, Inference())
    predictor.prepare(splits, tmp_path)
    assert len(fitted) == 2 and predictor.model.encoders is predictor.encoders[0]
    assert predictor.model.feature_names()["sentence"][len(SENTENCE_FEATURES)] == ENCODER_FEATURES[0]
    choice = json.loads((tmp_path / "grounding.json").read_text())["features_chosen"]
    assert set(choice["roc_auc"]) == {"plain", "word_odds"} and choice["chosen"] in choice["roc_auc"]

    records = splits["train"] + splits["val"]
    assert choose_features(records, config, "source", predictor.encoders)[1]["roc_auc"] == choice["roc_auc"]
    assert choose_features(records, replace(config, encoder=None), "source")[1]["roc_auc"] != choice["roc_auc"]
    assert len(fitted) == 2                       # the candidates read the encoders' logits; none fitted again


def test_a_token_threshold_left_to_choose_without_gold_spans_stays_at_its_default_and_says_why():
    """SummEdits' validation responses have no gold spans: nothing to choose a token threshold on."""
    from eval.predictors import GroundingPredictor

    config = GroundingConfig(encoder="embedded:minilm", encoder_head=EncoderHead.token,
                             encoder_token_spans=TokenSpans.anywhere, encoder_token_threshold=None)
    val = [{"id": "a", "label": 1, "spans": []}, {"id": "b", "label": 0, "spans": []}]
    chosen = GroundingPredictor(config, inference=None)._token_threshold(None, val, {}, "validation split")
    assert chosen.value == 0.5 and chosen.source == "default: no validation response has gold spans to choose it on"
