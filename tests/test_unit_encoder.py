"""The grounding annotator's unit encoder (models/unit_encoder.py): its token head reads the unit's tokens only,
learns which of them lie in a hallucinated span, and gives the unit its highest token's logit."""
import pytest
import torch

from models.unit_encoder import EncoderTraining, UnitEncoder, Validation, fit_unit_encoder, unit_logits

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


def test_early_stopping_keeps_the_best_epochs_weights_and_stops_after_its_patience(tiny_unit_encoder):
    # the validation pairs say the opposite of the training ones: the better the encoder learns, the worse it reads
    # them, so the figure peaks early and training stops `patience` epochs later
    pairs, spans = PAIRS * 8, SPANS * 8
    validation = Validation(PAIRS * 2, [[(19, 23)], []] * 2)          # "1843" hallucinated, "1901" supported
    training = EncoderTraining(epochs=12, lr=1e-3, max_len=64, batch_size=4, head="token", patience=2)
    model = fit_unit_encoder(str(tiny_unit_encoder), pairs, spans, training, seed=0, validation=validation)
    figures = [figure for _, figure in model.curve]
    best = max(range(len(figures)), key=figures.__getitem__)
    assert len(figures) == best + 1 + 2 < 12 and [epoch for epoch, _ in model.curve] == list(range(1, len(figures) + 1))
    assert not model.training and validation.roc_auc(model) == pytest.approx(figures[best], abs=1e-6)
    assert not model.training                                 # reading the validation pairs leaves its mode alone
    plain = fit_unit_encoder(str(tiny_unit_encoder), pairs, spans, EncoderTraining(epochs=2, lr=1e-3, max_len=64,
                                                                                   batch_size=4, head="token"), seed=0)
    assert plain.curve == []                                  # without patience, no validation pass at all


def test_a_stopped_training_goes_on_from_its_last_epoch_and_ends_where_an_unstopped_one_does(tiny_unit_encoder,
                                                                                              tmp_path, monkeypatch):
    from models import unit_encoder

    pairs, spans = PAIRS * 8, SPANS * 8
    validation = Validation(PAIRS * 2, SPANS * 2)
    training = EncoderTraining(epochs=3, lr=1e-3, max_len=64, batch_size=4, head="token", patience=5)
    unstopped = fit_unit_encoder(str(tiny_unit_encoder), pairs, spans, training, seed=0, validation=validation)

    save_epoch = unit_encoder.Checkpoint.save_epoch

    def save_then_stop(self, state):             # the run is killed right after its first epoch is saved
        save_epoch(self, state)
        raise KeyboardInterrupt
    monkeypatch.setattr(unit_encoder.Checkpoint, "save_epoch", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        fit_unit_encoder(str(tiny_unit_encoder), pairs, spans, training, seed=0, validation=validation,
                         checkpoint=tmp_path / "encoder")
    monkeypatch.undo()
    assert (tmp_path / "encoder" / "epoch.pt").exists() and not (tmp_path / "encoder" / "finished").exists()
    torch.manual_seed(123)                        # the resumed run's dropout comes from the checkpoint, not from here
    resumed = fit_unit_encoder(str(tiny_unit_encoder), pairs, spans, training, seed=0, validation=validation,
                               checkpoint=tmp_path / "encoder")
    assert [e for e, _ in resumed.curve] == [e for e, _ in unstopped.curve] == [1, 2, 3]
    assert [f for _, f in resumed.curve] == pytest.approx([f for _, f in unstopped.curve], abs=1e-6)
    for (name, a), b in zip(unstopped.state_dict().items(), resumed.state_dict().values()):
        assert torch.allclose(a, b, atol=1e-6), name
    assert not (tmp_path / "encoder" / "epoch.pt").exists()        # the finished encoder replaces the epoch's state

    again = fit_unit_encoder(str(tiny_unit_encoder), pairs, spans, training, seed=0, validation=validation,
                             checkpoint=tmp_path / "encoder")
    assert again.curve == resumed.curve and unit_logits([again], PAIRS) == unit_logits([resumed], PAIRS)
    other = EncoderTraining(epochs=1, lr=1e-3, max_len=64, batch_size=4, head="token")
    fresh = fit_unit_encoder(str(tiny_unit_encoder), pairs, spans, other, seed=0, checkpoint=tmp_path / "encoder")
    assert fresh.curve == [] and unit_logits([fresh], PAIRS) != unit_logits([resumed], PAIRS)


@pytest.mark.parametrize("native", [[], ["avx512_bf16"]])
def test_fine_tuning_computes_in_bf16_only_where_the_cpu_does_it_natively(native, monkeypatch):
    """Emulated bf16 (no AVX512-BF16, no AMX) is many times slower than fp32: there the encoder trains in fp32."""
    import models.builders
    from models.unit_encoder import native_bf16, training_autocast, training_precision

    monkeypatch.setattr(models.builders, "cpu_bf16_features", lambda: native)
    native_bf16.cache_clear()
    try:
        with training_autocast():
            product = torch.ones(4, 4) @ torch.ones(4, 4)
        assert product.dtype == (torch.bfloat16 if native else torch.float32)
        assert training_precision().startswith("bf16" if native else "fp32 (this CPU has no native bf16")
    finally:
        native_bf16.cache_clear()
