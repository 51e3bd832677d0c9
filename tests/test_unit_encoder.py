"""The grounding annotator's unit encoder (models/unit_encoder.py): its token head reads the unit's tokens only,
learns which of them lie in a hallucinated span, and gives the unit its highest token's logit."""
import pytest
import torch

from models.unit_encoder import EncoderTraining, UnitEncoder, fit_unit_encoder, unit_logits

PAIRS = [("Ada wrote notes in 1843.", "Ada Lovelace wrote her notes in 1843 ..."),
         ("Babbage built it in 1901.", "Babbage designed the engine in 1837 ...")]
SPANS = [[], [(20, 24)]]                       # "1901"


def test_the_token_head_targets_the_unit_tokens_inside_a_span(tiny_unit_encoder):
    model = UnitEncoder(tiny_unit_encoder, kind="token")
    _, offsets, in_unit = model.read(PAIRS)
    targets = model.targets(PAIRS, SPANS)
    assert len(targets) == int(in_unit.sum())                       # one per unit token, none for the evidence
    marked = [PAIRS[1][0][s:e] for (s, e), t in zip(offsets[1][in_unit[1]].tolist(), targets[in_unit[0].sum():])
              if t]
    assert "".join(marked) == "1901" and targets[:in_unit[0].sum()].sum() == 0
    assert UnitEncoder(tiny_unit_encoder).targets(PAIRS, SPANS).tolist() == [0.0, 1.0]


def test_a_units_logit_is_its_highest_tokens_and_the_evidence_never_counts(tiny_unit_encoder):
    model = UnitEncoder(tiny_unit_encoder, kind="token").eval()
    with torch.no_grad():
        per_token = model(PAIRS, training=True)
        _, _, in_unit = model.read(PAIRS)
        first = int(in_unit[0].sum())
        assert model(PAIRS).tolist() == pytest.approx([per_token[:first].max().item(), per_token[first:].max().item()],
                                                      abs=1e-5)


def test_the_token_head_learns_the_marked_tokens_and_is_refused_without_any(tiny_unit_encoder, tmp_path):
    pairs, spans = PAIRS * 8, SPANS * 8
    training = EncoderTraining(epochs=8, lr=1e-3, max_len=64, batch_size=4, head="token")
    model = fit_unit_encoder(str(tiny_unit_encoder), pairs, spans, training, seed=0)
    supported, hallucinated = unit_logits([model], PAIRS)
    assert hallucinated > supported
    model.save(tmp_path)
    assert unit_logits([UnitEncoder.load(tmp_path, 64, "token")], PAIRS) == pytest.approx([supported, hallucinated],
                                                                                          abs=1e-5)
    with pytest.raises(ValueError, match="needs hallucinated and supported tokens, found 0 hallucinated of"):
        fit_unit_encoder(str(tiny_unit_encoder), pairs, [[]] * len(pairs), training, seed=0)
    with pytest.raises(ValueError, match="unit encoder head: expected one of unit, token, found 'span'"):
        UnitEncoder(tiny_unit_encoder, kind="span")


def test_token_readings_are_the_unit_tokens_in_the_units_own_characters_and_the_units_logits(tiny_unit_encoder):
    from models.unit_encoder import token_readings

    model = UnitEncoder(tiny_unit_encoder, kind="token").eval()
    units, rows = token_readings([model, model], PAIRS)
    assert units == unit_logits([model, model], PAIRS)
    with torch.no_grad():
        per_token = model(PAIRS, training=True)
    assert [logit for row in rows for _, _, logit in row] == pytest.approx(per_token.tolist(), abs=1e-5)
    for (unit, _), row in zip(PAIRS, rows):
        assert "".join(unit[a:b] for a, b, _ in row) == unit.replace(" ", "")
