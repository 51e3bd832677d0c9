"""The grounding-features annotator (`eval.method=grounding`): what a response says that its source
does not, counted sentence by sentence, weighed by two logistic regressions fitted on the training
sources.

Each response sentence is read against its source: the share and number of its content words that the
source never uses, how many of those are numbers and capitalised words, the share of its word bigrams
the source lacks, its length and place. Beside them, the record's context: how many sentences, the
whole response's unsupported share, the source's length, the task type. A sentence model (label: the
sentence overlaps a gold span) marks spans; a response model (the sentences' features, their maximum
and mean) decides the response. With `eval.grounding.embedder` each sentence also gets its similarity to
the closest source sentences; with `eval.grounding.lm` what a causal LM expects of its tokens with and
without the source (eval/baselines/lm_evidence.py); with `eval.grounding.negation` its negation cues against its
closest source sentence's; with `eval.grounding.word_odds` the response model also reads how often its
unsupported words stood unsupported in hallucinated training responses against faithful ones
(`WordOdds`); with `eval.grounding.encoder` each unit also gets the logit of a cross-encoder fine-tuned on the
training units beside their closest source pieces (models/unit_encoder.py; a training unit's from the encoder
fitted on the other half of the training sources). Thresholds are chosen on the validation split: the response's for
`eval.threshold_for` (balanced accuracy, or F1; per task type with `eval.threshold_by`), the spans' for
character F1 (`eval/thresholds.py`); with `eval.grounding.cross_fit_by` on cross-fitted scores instead
(`cross_fitted_scores`). Words are Latin-script words, numbers, and single CJK characters,
so Chinese and Japanese are read character by character; with `eval.grounding.stem` a Latin-script word is
compared by its Snowball stem (says / said / saying; companies / company).
"""
from __future__ import annotations

import json
import logging
import math
import random
import re
import shutil
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from configs.choices import EncoderHead, EvidenceUnit, TokenSpans
from configs.schema import GroundingConfig
from data_builders.common.progress import progress
from data_builders.folds import group_key, grouped_folds, source_key
from data_builders.records import gold_spans
from data_builders.sentences import sentence_spans, unit_spans
from eval.baselines.lm_evidence import LM_FEATURES, lm_reader
from eval.thresholds import field_value, flagged_spans, is_hallucinated

log = logging.getLogger(__name__)
CJK = "\u3040-\u30ff\u3400-\u9fff"
WORD = re.compile(rf"[^\W\d_{CJK}]+|\d+(?:[.,:]\d+)*|[{CJK}]")
STOPWORDS = frozenset("""a about after all also an and any are as at be been before being but by can could did do
does for from had has have he her his how i if in into is it its may me might more most my no not of on or other
our over she should so some such than that the their them then there these they this those to was we were what
when where which who will with would you your""".split())
SENTENCE_FEATURES = ("unsupported_share", "unsupported_words", "unsupported_numbers", "unsupported_capitalised",
                     "unsupported_bigram_share", "log_words", "position", "is_first")
SEMANTIC_FEATURES = ("max_similarity", "top3_similarity")   # with eval.grounding.embedder
NEGATION_FEATURES = ("negations", "unmatched_negations")     # with eval.grounding.negation
WORD_ODDS_FEATURES = ("unsupported_log_odds_sum", "unsupported_log_odds_min")   # with eval.grounding.word_odds
ENCODER_FEATURES = ("encoder_logit",)                       # with eval.grounding.encoder
ENCODER_DIRS = ("unit_encoder_0", "unit_encoder_1")         # beside grounding.json
NEGATION = re.compile(r"\b(?:not|no|never|nothing|none|nobody|neither|nor|without|cannot)\b|n['\u2019]t|[不没未无非]",
                      re.IGNORECASE)
CONTEXT_FEATURES = ("log_sentences", "response_unsupported_share", "log_source_chars")
SOURCE_UNIT_CHARS, SOURCE_UNITS = 400, 200     # source pieces the embedder compares a sentence with
_READ: dict[tuple, tuple] = {}                  # a record's features, computed once per process (folds reuse them)
_PAIRS: dict[tuple, list] = {}                  # a record's (unit, evidence) pairs, likewise


def sentence_features(config: GroundingConfig) -> tuple[str, ...]:
    return (SENTENCE_FEATURES + (SEMANTIC_FEATURES if config.embedder else ()) + (LM_FEATURES if config.lm else ())
            + (NEGATION_FEATURES if config.negation else ()) + (ENCODER_FEATURES if config.encoder else ()))


TASK_TYPE_FIELD = "meta.task_type, else task"      # what `task_type` reads


def task_type(rec: dict) -> str:
    """The record's task type, which both models read as one-hot features (`GroundingModel.task_types`)."""
    return str((rec.get("meta") or {}).get("task_type") or rec.get("task") or "")


@dataclass
class Sentence:
    span: tuple[int, int]
    features: list[float]
    unsupported: tuple[str, ...] = ()     # its content words the source lacks, as compared (stemmed with stem)


def _words(text: str, start: int = 0, end: int | None = None) -> list[str]:
    return [m.group().lower() for m in WORD.finditer(text, start, len(text) if end is None else end)]


def _content(words: list[str]) -> list[str]:
    return [w for w in words if w not in STOPWORDS]


@lru_cache(maxsize=1)
def _stemmer():
    from nltk.stem.snowball import SnowballStemmer

    return SnowballStemmer("english")


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    """A Latin-script word's Snowball (English) stem; numbers and CJK characters as they are."""
    return _stemmer().stem(word) if word[0].isalpha() and word.isascii() else word


def _sentence(response: str, span: tuple[int, int], index: int, count: int, vocabulary: set[str],
              bigrams: set[tuple[str, str]], stem: bool) -> Sentence:
    raw = [m.group() for m in WORD.finditer(response, *span)]
    words = [w.lower() for w in raw]
    content = [(r, _stem(w) if stem else w) for r, w in zip(raw, words) if w not in STOPWORDS]
    words = [_stem(w) for w in words] if stem else words
    unsupported = [(r, w) for r, w in content if w not in vocabulary]
    pairs = list(zip(words, words[1:]))
    return Sentence(span, [len(unsupported) / max(1, len(content)), len(unsupported),
                           sum(w[0].isdigit() for _, w in unsupported), sum(r[0].isupper() for r, _ in unsupported),
                           sum(p not in bigrams for p in pairs) / max(1, len(pairs)), math.log1p(len(content)),
                           index / count, float(index == 0)], tuple(w for _, w in unsupported))


WORDS_ONLY = GroundingConfig()


def sentences(rec: dict, config: GroundingConfig = WORDS_ONLY) -> tuple[list[Sentence], list[float]]:
    """The response's units (`config.unit`) with their features, and the record's context features; with
    an embedder (`minilm`, an embedded encoder such as `embedded:e5-small`, or a sentence-transformers
    directory) each unit also gets its highest and its top-3 mean cosine similarity to the source's
    sentences, with an LM its tokens' log-probabilities with and without the source."""
    key = (rec.get("id"), hash(rec["source"]), hash(rec["response"]), config.embedder, str(config.unit),
           config.lm, config.lm_source_tokens, config.negation, config.stem)
    if key not in _READ:
        _READ[key] = _sentences(rec, config)
    return _READ[key]


def _sentences(rec: dict, config: GroundingConfig) -> tuple[list[Sentence], list[float]]:
    source, response = rec["source"], rec["response"]
    source_words = [_stem(w) for w in _words(source)] if config.stem else _words(source)
    vocabulary, bigrams = set(source_words), set(zip(source_words, source_words[1:]))
    spans = unit_spans(response, rec.get("language", "en"), str(config.unit)) or [(0, len(response))]
    out = [_sentence(response, s, i, len(spans), vocabulary, bigrams, config.stem) for i, s in enumerate(spans)]
    if config.embedder:
        for sentence, similar in zip(out, _similarities(rec, [s.span for s in out], config.embedder)):
            sentence.features += similar
    if config.lm:
        evidence = lm_reader(config.lm, config.lm_source_tokens, config.lm_cache_dir).read(rec)
        for sentence in out:
            sentence.features += evidence.unit_features(sentence.span)
    if config.negation:
        for sentence, negations in zip(out, _negations(rec, [s.span for s in out])):
            sentence.features += negations
    content = [_stem(w) if config.stem else w for w in _content(_words(response))]
    context = [math.log(len(spans)), sum(w not in vocabulary for w in content) / max(1, len(content)),
               math.log1p(len(source))]
    return out, context


def source_units(source: str, language: str) -> list[str]:
    """The source's sentences, each longer than SOURCE_UNIT_CHARS cut into pieces of that size (a data-to-text
    source is one long JSON line), at most SOURCE_UNITS of them."""
    pieces = [source[a:b][i:i + SOURCE_UNIT_CHARS] for a, b in sentence_spans(source, language)
              for i in range(0, b - a, SOURCE_UNIT_CHARS)]
    return pieces[:SOURCE_UNITS] or [source[:SOURCE_UNIT_CHARS]]


def _ranker(embedder: str):
    from data_builders.model_inputs.retrieval import EmbeddingRanker  # torch and transformers: only with one
    from models.builders import EMBEDDED_PREFIX, resolve_model_path

    return EmbeddingRanker(resolve_model_path(embedder) if embedder.startswith(EMBEDDED_PREFIX) else embedder)


@lru_cache(maxsize=512)
def _source_embeddings(embedder: str, source: str, language: str):
    """A source's units, embedded once: a benchmark's source is read by many responses (SummEdits' documents
    by about 30 summaries each, RAGTruth's by 6 models' responses)."""
    return _ranker(embedder).encode(source_units(source, language))


def _similarities(rec: dict, spans: list[tuple[int, int]], embedder: str) -> list[list[float]]:
    units = _source_embeddings(embedder, rec["source"], rec.get("language", "en"))
    said = _ranker(embedder).encode([rec["response"][a:b] for a, b in spans])
    top = -np.sort(-(said @ units.T).float().cpu().numpy(), axis=1)[:, :3]
    return [[float(row[0]), float(row.mean())] for row in top]


def _negations(rec: dict, spans: list[tuple[int, int]]) -> list[list[float]]:
    """Each unit's negation cues, and how many more it has than the source sentence sharing most of its
    content words: an inserted "not" is a stopword, which the unsupported-word counts never see."""
    source, response = rec["source"], rec["response"]
    said = [(set(_content(_words(source, a, b))), len(NEGATION.findall(source, a, b)))
            for a, b in sentence_spans(source, rec.get("language", "en"))] or [(set(), 0)]
    out = []
    for a, b in spans:
        words, cues = set(_content(_words(response, a, b))), len(NEGATION.findall(response, a, b))
        _, closest = max(said, key=lambda sentence: len(words & sentence[0]))
        out.append([float(cues), float(max(0, cues - closest))])
    return out


def unit_pairs(rec: dict, config: GroundingConfig) -> list[tuple[str, str]]:
    """What the unit encoder reads of each unit: its text, and its `encoder_evidence` closest source pieces (by
    the embedder's similarity, MiniLM's without one) joined in source order."""
    key = (rec.get("id"), hash(rec["source"]), hash(rec["response"]), str(config.unit), config.embedder,
           config.encoder_evidence)
    if key not in _PAIRS:
        embedder, language = config.embedder or "minilm", rec.get("language", "en")
        pieces = source_units(rec["source"], language)
        texts = [rec["response"][a:b] for a, b in (s.span for s in sentences(rec, config)[0])]
        similar = (_ranker(embedder).encode(texts) @ _source_embeddings(embedder, rec["source"], language).T)
        closest = np.argsort(-similar.float().cpu().numpy(), axis=1)[:, :config.encoder_evidence]
        _PAIRS[key] = [(text, " ... ".join(pieces[j] for j in sorted(row))) for text, row in zip(texts, closest)]
    return _PAIRS[key]


def source_halves(train: list[dict]) -> list[set[str]]:
    """The training sources dealt into two halves in a seeded order (`data_builders.folds.source_key`)."""
    sources = sorted({source_key(r) for r in train})
    if len(sources) < 2:
        raise GroundingError(f"eval.grounding.encoder fine-tunes two encoders on halves of the train sources: found "
                             f"{len(sources)} source")
    random.Random(0).shuffle(sources)
    return [set(sources[0::2]), set(sources[1::2])]


def group_halves(train: list[dict], by: str) -> list[set[str]]:
    """The values of `by` (meta.domain) dealt into two halves of about as many records, the largest first."""
    sizes = Counter(str(field_value(r, by)) for r in train)
    if len(sizes) < 2:
        raise GroundingError(f"eval.grounding.encoder with cross_fit_by={by} fine-tunes two encoders on halves of "
                             f"its values: found {sorted(sizes)}")
    halves: list[set[str]] = [set(), set()]
    for value in sorted(sizes, key=lambda v: (-sizes[v], v)):
        min(halves, key=lambda half: sum(sizes[v] for v in half)).add(value)
    return halves


def encoder_parts(train: list[dict], config: GroundingConfig) -> list[list[dict]]:
    """The training records each of the two unit encoders fits on: halves of the sources; with `cross_fit_by`,
    halves of its values, so that a training unit's logit comes from an encoder that never saw its domain, as a
    test domain's does."""
    if config.cross_fit_by:
        by = config.cross_fit_by
        return [[r for r in train if str(field_value(r, by)) in half] for half in group_halves(train, by)]
    return [[r for r in train if source_key(r) in half] for half in source_halves(train)]


Encoders = tuple[list, dict[str, list[float]]]   # the two fitted unit encoders; each training record's held-out logits


VALIDATION_RECORDS = 400    # early stopping reads at most this many records of the other half, sampled once


def fit_unit_encoders(train: list[dict], config: GroundingConfig, checkpoints: Path | None = None) -> Encoders:
    """Two unit encoders, each fine-tuned on the units of one part of the training records (`encoder_parts`), and
    each training record's unit logits from the encoder that never saw its part: a training unit's feature is then
    what a test unit's is (read by encoders that saw none of its source), not a memorised label. Test units read
    the two's mean. With `encoder_patience`, each stops early on a sample of the other part's units. With
    `checkpoints`, each saves its training there after each epoch, and a stopped run goes on from it. With
    `encoder_from`, the two go on from the encoders fitted there, each on its part of the records of sources
    neither saw; a record of a source one saw is read by the other."""
    from models.unit_encoder import EncoderTraining, fit_unit_encoder, unit_logits

    starts = encoder_starts(config)
    seen = set().union(*(start.sources for start in starts))
    own = [r for r in train if source_key(r) not in seen]
    parts = encoder_parts(own, config)
    training = EncoderTraining(config.encoder_epochs, config.encoder_lr, config.encoder_max_len,
                               head=str(config.encoder_head), patience=config.encoder_patience)
    encoders = []
    for i, (part, other, start) in enumerate(zip(parts, reversed(parts), starts)):
        pairs, spans = encoder_examples(part + encoder_twins(part, config, i), config,
                                        f"unit encoder {i + 1} of 2: its units and their evidence")
        encoders.append(fit_unit_encoder(start.path, pairs, spans, training, seed=i, desc=f"unit encoder {i + 1} of 2",
                                         validation=config.encoder_patience and validation_units(other, config, i),
                                         checkpoint=checkpoints and checkpoints / f"encoder_{i + 1}", head=start.head))
        encoders[-1].sources = sorted(start.sources | {source_key(r) for r in part})
    held_out = {rec["id"]: unit_logits([encoder], unit_pairs(rec, config))
                for encoder, other in zip(encoders, reversed(parts))
                for rec in progress(other, desc="unit encoders: the other half's logits")}
    seen_before = [r for r in train if source_key(r) in seen]
    for rec in progress(seen_before, desc="unit encoders: logits of the records they saw before, by the other"):
        held_out[rec["id"]] = unit_logits(unseen_by(rec, encoders), unit_pairs(rec, config))
    return encoders, held_out


@dataclass(frozen=True)
class EncoderStart:
    """Where a fit's unit encoder starts: a pretrained encoder with a fresh head, or (`encoder_from`) an encoder
    fitted before, with its head and the sources it was fine-tuned on."""
    path: str
    head: dict | None = None
    sources: frozenset[str] = frozenset()


def encoder_starts(config: GroundingConfig) -> list[EncoderStart]:
    """The two encoders' starting points: `encoder` for both, or `encoder_from`'s first and second."""
    from safetensors.torch import load_file

    from models.builders import resolve_model_path
    from models.unit_encoder import HEAD_FILE

    if not config.encoder_from:
        path = resolve_model_path(config.encoder, key="eval.grounding.encoder")
        return [EncoderStart(path), EncoderStart(path)]
    path, entry = saved_encoder(config.encoder_from, "encoder_from")
    if len(entry["dirs"]) != 2 or not entry.get("sources"):
        raise GroundingError(f"{path}: eval.grounding.encoder_from goes on fine-tuning two encoders, each on records "
                             f"of sources neither saw: expected two, each with the sources it saw (`sources`), found "
                             f"{len(entry['dirs'])} and {'their' if entry.get('sources') else 'no'} sources")
    return [EncoderStart(str(path.parent / d), load_file(str(path.parent / d / HEAD_FILE)), frozenset(sources))
            for d, sources in zip(entry["dirs"], entry["sources"])]


def unit_encoders(train: list[dict], config: GroundingConfig, checkpoints: Path | None = None) -> Encoders:
    """The unit encoders the regressions read: fine-tuned on `train` (`fit_unit_encoders`), or with
    `encoder_fitted` those of another run, read as they are (`read_fitted_encoders`)."""
    if config.encoder_fitted:
        return read_fitted_encoders(train, config)
    return fit_unit_encoders(train, config, checkpoints)


def fitted_encoder_config(config: GroundingConfig) -> GroundingConfig:
    """`config` with the unit-encoder settings of the grounding model saved in `config.encoder_fitted` (a run's
    fold directory or an export): the encoders are read as that model reads them."""
    from dataclasses import replace

    path, encoder = saved_encoder(config.encoder_fitted, "encoder_fitted")
    return replace(config, encoder=encoder["name"], encoder_evidence=encoder["evidence"],
                   encoder_epochs=encoder["epochs"], encoder_lr=encoder["lr"], encoder_max_len=encoder["max_len"],
                   encoder_head=saved_head(path, encoder, config))


def continued_encoder_config(config: GroundingConfig) -> GroundingConfig:
    """`config` with the unit-encoder settings that `config.encoder_from`'s encoders were fitted with (base model,
    head, evidence, length); how they go on learning (epochs, lr, patience, twins) stays `config`'s."""
    from dataclasses import replace

    path, encoder = saved_encoder(config.encoder_from, "encoder_from")
    head = saved_head(path, encoder, config)
    if config.encoder_head not in (EncoderHead.unit, head):
        raise GroundingError(f"{path}: its encoders have a {head} head, and eval.grounding.encoder_head="
                             f"{config.encoder_head}: encoder_from goes on training the head they have")
    return replace(config, encoder=encoder["name"], encoder_evidence=encoder["evidence"],
                   encoder_max_len=encoder["max_len"], encoder_head=head)


def saved_encoder(directory: str, key: str) -> tuple[Path, dict]:
    """The grounding.json in `directory` (eval.grounding.`key`) and its `encoder` entry, or why there is none."""
    path = Path(directory) / "grounding.json"
    if not path.is_file():
        raise GroundingError(f"{directory} (eval.grounding.{key}): expected a grounding run's fold directory or an "
                             f"export holding grounding.json and its unit encoders, found no {path}")
    encoder = json.loads(path.read_text(encoding="utf-8")).get("encoder")
    if not encoder:
        raise GroundingError(f"{path}: its model reads no unit encoder (no 'encoder' entry); "
                             f"eval.grounding.{key} needs one fitted with eval.grounding.encoder")
    return path, encoder


def saved_head(path: Path, encoder: dict, config: GroundingConfig) -> EncoderHead:
    head = EncoderHead(encoder.get("head", "unit"))
    if config.encoder_token_spans != TokenSpans.whole_units and head != EncoderHead.token:
        raise GroundingError(f"{path}: its encoders have a {head} head, and eval.grounding's encoder_token_spans="
                             f"{config.encoder_token_spans} marks the tokens a token head marks: use whole_units")
    return head


_FITTED_READS: dict[tuple, tuple[list, dict]] = {}   # per process: the folds of a launch read each record once


def read_fitted_encoders(records: list[dict], config: GroundingConfig) -> Encoders:
    """The unit encoders saved beside the grounding model of `config.encoder_fitted` (as `fitted_encoder_config`
    resolved it), and each record's unit logits: their mean, or, for a record whose source one of them was
    fine-tuned on (another benchmark's records beside the folds, `data.fold_extra_train`), the other's alone, so
    that no record's feature is an encoder's memory of its label."""
    from models.unit_encoder import unit_logits

    root = Path(config.encoder_fitted)
    key = (str(root.resolve()), config.encoder_evidence, config.embedder, str(config.unit))
    if key not in _FITTED_READS:
        entry = json.loads((root / "grounding.json").read_text(encoding="utf-8"))["encoder"]
        _FITTED_READS[key] = (load_encoders(root, entry), {})
    encoders, read = _FITTED_READS[key]
    unread = [r for r in records if _read_key(r) not in read]
    for rec in progress(unread, desc=f"unit encoders of {root}: their units' logits", disable=len(unread) < 2):
        read[_read_key(rec)] = unit_logits(unseen_by(rec, encoders), unit_pairs(rec, config))
    return encoders, {rec["id"]: read[_read_key(rec)] for rec in records}


def load_encoders(root: Path, entry: dict) -> list:
    """The unit encoders a grounding.json's `encoder` entry lists under `root`, each with the sources it was
    fine-tuned on (none listed in a file written before they were: every record then reads both)."""
    from models.unit_encoder import UnitEncoder

    encoders = [UnitEncoder.load(root / d, entry["max_len"], entry.get("head", "unit")) for d in entry["dirs"]]
    for e, sources in zip(encoders, entry.get("sources") or [[] for _ in encoders]):
        e.sources = sources
    return encoders


def unseen_by(rec: dict, encoders: list) -> list:
    """The encoders that were not fine-tuned on the record's source (all of them where every one was)."""
    key = source_key(rec)
    return [e for e in encoders if key not in e.sources] or encoders


def _read_key(rec: dict) -> tuple:
    return rec["id"], hash(rec["source"]), hash(rec["response"])


def held_out_readers(records: list[dict], config: GroundingConfig, encoders: list) -> dict[str, list]:
    """Each of the records the encoders were fitted on (`fit_unit_encoders`), with the one encoder that never saw
    it (with `encoder_from`, a record its start saw by `unseen_by`): what reads its tokens when a token threshold
    is chosen on them (cross-fitted)."""
    seen = set().union(*saved_encoder(config.encoder_from, "encoder_from")[1]["sources"]) if config.encoder_from \
        else set()
    parts = encoder_parts([r for r in records if source_key(r) not in seen], config)
    return {**{rec["id"]: unseen_by(rec, encoders) for rec in records if source_key(rec) in seen},
            **{rec["id"]: [encoders[1 - i]] for i, part in enumerate(parts) for rec in part}}


def encoder_examples(records: list[dict], config: GroundingConfig, desc: str) -> tuple[list, list]:
    """The (unit, evidence) pairs of the records and each unit's hallucinated spans, as the encoders learn them."""
    pairs, spans, unlocated = [], [], 0
    for rec in progress(records, desc=desc):
        pairs += unit_pairs(rec, config)
        spans += encoder_spans(rec, sentences(rec, config)[0], config)
        unlocated += rec["label"] == 1 and not located(rec, config)
    if unlocated:
        log.info("%s: %d hallucinated responses have no spans; each of their units is labelled hallucinated",
                 desc, unlocated)
    return pairs, spans


def validation_units(other: list[dict], config: GroundingConfig, seed: int):
    """What early stopping reads: the units of at most `VALIDATION_RECORDS` records of the part the encoder never
    trains on (no twins), sampled with the encoder's seed."""
    from models.unit_encoder import Validation

    sample = random.Random(seed).sample(other, min(len(other), VALIDATION_RECORDS))
    return Validation(*encoder_examples(sample, config, f"unit encoder {seed + 1} of 2: early stopping's units"))


def encoder_twins(part: list[dict], config: GroundingConfig, seed: int) -> list[dict]:
    """`encoder_twins` hallucinated twins of each faithful record of `part`, built from `part` alone."""
    from data_builders.synthetic.twins import EDITS, SyntheticSettings, count_line, synthesize

    if not config.encoder_twins:
        return []
    unknown = sorted(set(config.encoder_twin_edits) - set(EDITS))
    if unknown or not config.encoder_twin_edits:
        raise GroundingError(f"eval.grounding.encoder_twin_edits: expected some of {', '.join(EDITS)}, found "
                             f"{list(config.encoder_twin_edits)}")
    made, counts = synthesize(part, SyntheticSettings(twins=config.encoder_twins,
                                                      edits=tuple(config.encoder_twin_edits), seed=seed))
    log.info("unit encoder %d of 2: %s", seed + 1, count_line(counts))
    return made


def located(rec: dict, config: GroundingConfig) -> list[tuple[int, int]]:
    """Where a hallucinated response's error lies, as far as the record says: its gold spans, else (with
    `encoder_edited_spans`) the words its dataset says were edited (`meta.edited_spans`: SummEdits' words that
    differ from the seed summary); [] when unknown."""
    if rec.get("spans"):
        return gold_spans(rec)
    edited = (rec.get("meta") or {}).get("edited_spans") if config.encoder_edited_spans else None
    return [(a, b) for a, b in edited or []]


def encoder_spans(rec: dict, found: list[Sentence], config: GroundingConfig) -> list[list[tuple[int, int]]]:
    """What the unit encoder learns of each unit: the hallucinated spans inside it (`located`), in its own
    characters; in a hallucinated response whose error is not located every unit is hallucinated whole, since
    which one holds the error is unknown."""
    if not rec["label"]:
        return [[] for _ in found]
    marked = located(rec, config)
    if not marked:
        return [[(0, s.span[1] - s.span[0])] for s in found]
    return [[(max(a, start) - start, min(b, end) - start) for a, b in marked if a < end and b > start]
            for start, end in (s.span for s in found)]


def gold_sentence_labels(rec: dict, found: list[Sentence]) -> list[int]:
    gold = gold_spans(rec)
    return [int(any(a < s.span[1] and b > s.span[0] for a, b in gold)) for s in found]


@dataclass
class Linear:
    """A fitted logistic regression kept as numbers: standardisation, weights, bias."""
    mean: list[float]
    scale: list[float]
    weights: list[float]
    bias: float

    def probability(self, x: np.ndarray) -> np.ndarray:
        z = ((x - np.asarray(self.mean)) / np.asarray(self.scale)) @ np.asarray(self.weights) + self.bias
        return 1.0 / (1.0 + np.exp(-z))

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray, c: float) -> Linear:
        from sklearn.linear_model import LogisticRegression

        mean, scale = x.mean(0), x.std(0)
        scale[scale == 0] = 1.0
        model = LogisticRegression(C=c, max_iter=5000, class_weight="balanced").fit((x - mean) / scale, y)
        return cls(mean.tolist(), scale.tolist(), model.coef_[0].tolist(), float(model.intercept_[0]))


Held = tuple[Counter, Counter, tuple[int, int]]   # one source's responses: its words' counts by label, and theirs


@dataclass
class WordOdds:
    """Which unsupported words mark a hallucinated response, learned from the train split: each word's smoothed
    log-odds of standing unsupported in a hallucinated training response against a faithful one. SummEdits'
    faithful edits paraphrase with words its documents never use ("requests", "examining"), its unfaithful ones
    bring new things ("ghee", "Greece"): the counts alone cannot tell these apart, their words can."""
    hallucinated: dict[str, int]    # in how many hallucinated training responses the word stands unsupported
    faithful: dict[str, int]        # ... and in how many faithful ones
    responses: tuple[int, int]      # hallucinated, faithful training responses
    smoothing: float = 1.0          # pseudo-responses drawn toward the prior

    def log_odds(self, word: str, held_out: Held | None = None) -> float:
        (h, f), (n_h, n_f) = (self.hallucinated.get(word, 0), self.faithful.get(word, 0)), self.responses
        if held_out:
            h, f = h - held_out[0][word], f - held_out[1][word]
            n_h, n_f = n_h - held_out[2][0], n_f - held_out[2][1]
        prior, a = min(0.99, max(0.01, n_h / max(1, n_h + n_f))), self.smoothing
        return math.log((h + a * prior) / (n_h + a)) - math.log((f + a * (1 - prior)) / (n_f + a))

    def features(self, words: tuple[str, ...], held_out: Held | None = None) -> list[float]:
        odds = [self.log_odds(w, held_out) for w in words]
        return [sum(odds), min(odds, default=0.0)]

    @classmethod
    def fit(cls, train: list[dict], config: GroundingConfig) -> tuple[WordOdds, dict[int, Held]]:
        """The table, and each training source's own counts: a training response's features leave out every
        response of its source (SummEdits' 30 edits of one seed summary share its words), as a test one's
        never saw them."""
        by_source: dict[int, Held] = {}
        for rec in train:
            h, f, (n_h, n_f) = by_source.get(cls.source_of(rec), (Counter(), Counter(), (0, 0)))
            (h if rec["label"] else f).update({w for s in sentences(rec, config)[0] for w in s.unsupported})
            by_source[cls.source_of(rec)] = h, f, (n_h + bool(rec["label"]), n_f + (not rec["label"]))
        hallucinated, faithful, responses = Counter(), Counter(), (0, 0)
        for h, f, (n_h, n_f) in by_source.values():
            hallucinated.update(h)
            faithful.update(f)
            responses = (responses[0] + n_h, responses[1] + n_f)
        return cls(dict(hallucinated), dict(faithful), responses), by_source

    @staticmethod
    def source_of(rec: dict) -> int:
        """The key of a record's source among the held-out counts (one process: fitted and read together)."""
        return hash(rec["source"])


def encoder_curve_lines(saved: dict[int, dict]) -> list[str]:
    """A report section of the unit encoders' early-stopping curves in each fold's `grounding.json` (`saved`, by
    fold): the ROC AUC on the other half's units after each epoch (epoch 0: where an `encoder_from` encoder
    started), the epoch kept in bold. None where no encoder was stopped early."""
    rows = [(fold, k + 1, curve) for fold, body in sorted(saved.items())
            for k, curve in enumerate((body.get("encoder") or {}).get("curves") or []) if curve]
    if not rows:
        return []
    lines = ["## Unit encoders: ROC AUC on the other half's units after each epoch (bold: the epoch kept)", "",
             "| fold | encoder | epoch: ROC AUC |", "|---|---|---|"]
    for fold, k, curve in rows:
        kept = max(range(len(curve)), key=lambda j: (curve[j][1], -j))    # early stopping keeps the first best
        points = (f"{epoch:g}: " + (f"**{figure:.3f}**" if j == kept else f"{figure:.3f}")
                  for j, (epoch, figure) in enumerate(curve))
        lines.append(f"| {fold} | {k} | {', '.join(points)} |")
    return lines


@dataclass
class GroundingModel:
    task_types: list[str]
    config: GroundingConfig          # what a unit is (sentence | clause) and what reads it (embedder, lm)
    sentence: Linear | None = None   # None: the training records have no gold spans, so nothing marks spans
    response: Linear | None = None   # None: every training record is hallucinated (UHGEval): spans decide
    task_responses: dict[str, Linear] | None = None   # eval.grounding.response_by_task: a task type's own
    threshold: float = 0.5           # response: hallucinated when its probability reaches it
    span_threshold: float = 0.5      # a unit of a hallucinated response is marked when its probability reaches it
    token_threshold: float = 0.5     # with token spans, a token is marked when its probability reaches it
    thresholds_by: dict | None = None    # {"field": a record path, "values": {value: threshold}} (eval.threshold_by)
    word_odds: WordOdds | None = None    # eval.grounding.word_odds, where the train split has both labels
    encoders: list = field(default_factory=list)     # eval.grounding.encoder: the two fine-tuned unit encoders
    held_out_logits: dict | None = field(default=None, repr=False)   # while fitting: the training units' logits
    last_read: tuple | None = field(default=None, repr=False)        # `_token_readings`' last record

    def threshold_of(self, rec: dict) -> float:
        """The response threshold of a record: its group's (`eval.threshold_by`), else the overall one."""
        if not self.thresholds_by:
            return self.threshold
        value = field_value(rec, self.thresholds_by["field"])
        return self.thresholds_by["values"].get(str(value), self.threshold)

    def _task(self, rec: dict) -> list[float]:
        return [float(task_type(rec) == t) for t in self.task_types]

    def sentence_matrix(self, rec: dict, held_out: Held | None = None) -> tuple[list[Sentence], np.ndarray, np.ndarray]:
        """The units, their sentence-model rows, and the record's response-model row. Word odds, learnt from
        responses' labels, join the response model only (a training record's without its source's responses:
        `held_out`)."""
        found, context = sentences(rec, self.config)
        logits = self._encoder_logits(rec) if self.config.encoder else None
        units = [s.features + [logit] for s, logit in zip(found, logits)] if logits is not None else [
            s.features for s in found]
        rows = np.array([u + context + self._task(rec) for u in units], dtype=float)
        own = np.array([u + (self.word_odds.features(s.unsupported, held_out) if self.word_odds else [])
                        for s, u in zip(found, units)], dtype=float)
        return found, rows, np.concatenate([own.max(0), own.mean(0), context, self._task(rec)])

    def _encoder_logits(self, rec: dict) -> list[float]:
        """The unit encoders' logits of the record's units: while fitting, a training record's from the encoder
        that never saw its source; else the mean of those that never saw it (`unseen_by`: both, for a record new to
        them; with token spans, from the pass that reads the tokens `marked_spans` keeps)."""
        if self.held_out_logits is not None and rec["id"] in self.held_out_logits:
            return self.held_out_logits[rec["id"]]
        from models.unit_encoder import unit_logits

        if self.config.encoder_token_spans == TokenSpans.whole_units:
            if self.config.encoder_fitted:      # the launch's reads of these encoders, kept across its folds
                return read_fitted_encoders([rec], self.config)[1][rec["id"]]
            return unit_logits(unseen_by(rec, self.encoders), unit_pairs(rec, self.config))
        return self._token_readings(rec)[0]

    def _token_readings(self, rec: dict, encoders: list | None = None
                        ) -> tuple[list[float], list[list[tuple[int, int, float]]]]:
        """The token heads' reading of the record's units (by `encoders`, else the model's), kept for the last
        record read: `scores` and `marked_spans` share one pass of the encoders."""
        from models.unit_encoder import token_readings

        encoders = encoders or unseen_by(rec, self.encoders)
        key = (rec["id"], hash(rec["source"]), hash(rec["response"]), *map(id, encoders))
        if self.last_read is None or self.last_read[0] != key:
            self.last_read = (key, token_readings(encoders, unit_pairs(rec, self.config)))
        return self.last_read[1]

    def scores(self, rec: dict) -> tuple[float, list[list]]:
        """The response's probability of being hallucinated (without a response model: its most likely
        unit's) and [start, end, p] of each unit."""
        found, rows, response_row = self.sentence_matrix(rec)
        per_unit = ([] if self.sentence is None else
                    [[*s.span, float(q)] for s, q in zip(found, self.sentence.probability(rows))])
        if self.response is None:
            return max((q for *_, q in per_unit), default=0.0), per_unit
        response = (self.task_responses or {}).get(task_type(rec), self.response)
        return float(response.probability(response_row[None])[0]), per_unit

    def predict(self, rec: dict) -> dict:
        score, per_unit = self.scores(rec)
        threshold = self.threshold_of(rec)
        if self.response is None:
            spans = self.marked_spans(rec, per_unit)
            label = int(bool(spans))
        else:
            label = is_hallucinated(score, threshold)
            spans = self.marked_spans(rec, per_unit) if label else []
        return {"id": rec["id"], "label": label, "score": score, "threshold": threshold, "spans": spans,
                "per_unit": per_unit}

    def marked_spans(self, rec: dict, per_unit: list[list]) -> list[list[int]]:
        """The spans of a hallucinated response: its units that reach the span threshold (`encoder_token_spans`:
        whole_units); else the runs of tokens that reach the token threshold in the units `token_runs` reads."""
        if self.config.encoder_token_spans == TokenSpans.whole_units:
            return flagged_spans(per_unit, self.span_threshold)
        return [span for run in self.token_runs(rec, per_unit) for span in flagged_spans(run, self.token_threshold)]

    def token_runs(self, rec: dict, per_unit: list[list], encoders: list | None = None) -> list[list[list]]:
        """[start, end, probability] of the token heads' tokens (the sigmoid of their mean logit; `encoders`', else
        the model's), a list per unit read: the units that reach the span threshold (in_marked_units), or every
        unit (anywhere)."""
        units = sentences(rec, self.config)[0]
        read = ([True] * len(units) if self.config.encoder_token_spans == TokenSpans.anywhere else
                [is_hallucinated(q, self.span_threshold) for *_, q in per_unit])
        return [[[unit.span[0] + a, unit.span[0] + b, 0.5 * (1 + math.tanh(logit / 2))] for a, b, logit in tokens]
                for unit, keep, tokens in zip(units, read, self._token_readings(rec, encoders)[1]) if keep]

    def encoders_fitted(self) -> str:
        if self.config.encoder_fitted:
            return (f"read as fitted in {self.config.encoder_fitted}, not fine-tuned by the run that fitted this model "
                    "(a record whose source one of them was fine-tuned on is read by the other alone)")
        by = self.config.cross_fit_by
        if self.config.encoder_from:
            return (f"went on fine-tuning the two in {self.config.encoder_from}, each on the units of half the train "
                    f"{f'values of {by}' if by else 'sources'} neither saw; a training unit's logit from one that "
                    "never saw its source")
        return f"each on the units of half the train {f'values of {by}' if by else 'sources'}; a training unit's " \
               "logit from the other"

    def feature_names(self) -> dict[str, list[str]]:
        """The columns of the sentence model and of the response model, in order."""
        own = sentence_features(self.config)
        odds = WORD_ODDS_FEATURES if self.word_odds else ()
        return {"sentence": [*own, *CONTEXT_FEATURES, *self.task_types],
                "response": [*(f"max_{f}" for f in own + odds), *(f"mean_{f}" for f in own + odds), *CONTEXT_FEATURES,
                             *self.task_types]}

    def save(self, path: Path, provenance: dict) -> None:
        """The model as JSON: thresholds with where they came from, and each weight beside its feature; the unit
        encoders beside it, each a `from_pretrained` directory with its head (`ENCODER_DIRS`)."""
        names = self.feature_names()
        for i, encoder in enumerate(self.encoders):
            shutil.rmtree(path.parent / ENCODER_DIRS[i], ignore_errors=True)
            encoder.save(path.parent / ENCODER_DIRS[i])
        body = {"threshold": self.threshold, "span_threshold": self.span_threshold,
                "token_threshold": self.token_threshold,
                "thresholds_by": self.thresholds_by, **provenance,
                "task_types": self.task_types, "embedder": self.config.embedder, "unit": str(self.config.unit),
                "lm": self.config.lm, "lm_source_tokens": self.config.lm_source_tokens,
                "negation": self.config.negation, "stem": self.config.stem,
                "word_odds": self.word_odds and {**vars(self.word_odds), "features": WORD_ODDS_FEATURES},
                "encoder": self.config.encoder and {
                    "name": self.config.encoder, "evidence": self.config.encoder_evidence,
                    "epochs": self.config.encoder_epochs, "lr": self.config.encoder_lr,
                    "max_len": self.config.encoder_max_len, "head": str(self.config.encoder_head),
                    "edited_spans": self.config.encoder_edited_spans, "dirs": list(ENCODER_DIRS[:len(self.encoders)]),
                    "token_spans": str(self.config.encoder_token_spans),
                    "patience": self.config.encoder_patience, "curves": [e.curve for e in self.encoders],
                    "sources": [e.sources for e in self.encoders], "continued_from": self.config.encoder_from,
                    "fitted": self.encoders_fitted()},
                **{part: {**vars(getattr(self, part)), "features": names[part]} if getattr(self, part) else None
                   for part in names},
                "task_responses": self.task_responses and {
                    task: {**vars(linear), "features": names["response"]}
                    for task, linear in self.task_responses.items()}}
        path.write_text(json.dumps(body, indent=1, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> GroundingModel:
        """The model `save` wrote (JSON: numbers and word counts, nothing that runs; the unit encoders' weights as
        safetensors); its features are checked against what this version computes, so a file of another version
        is refused rather than misread."""
        path = Path(path)
        body = json.loads(path.read_text(encoding="utf-8"))
        encoder = body.get("encoder")
        config = GroundingConfig(unit=EvidenceUnit(body["unit"]), embedder=body["embedder"], lm=body["lm"],
                                 lm_source_tokens=body["lm_source_tokens"], negation=body["negation"],
                                 stem=body["stem"], word_odds=body["word_odds"] is not None,
                                 response_by_task=bool(body.get("task_responses")),
                                 **({"encoder": encoder["name"], "encoder_evidence": encoder["evidence"],
                                     "encoder_epochs": encoder["epochs"], "encoder_lr": encoder["lr"],
                                     "encoder_max_len": encoder["max_len"],
                                     "encoder_head": EncoderHead(encoder.get("head", "unit")),
                                     "encoder_edited_spans": encoder.get("edited_spans", False),
                                     "encoder_token_spans": TokenSpans(encoder.get("token_spans", "whole_units")),
                                     "encoder_patience": encoder.get("patience")}
                                    if encoder else {}))
        odds = body["word_odds"]
        model = cls(body["task_types"], config, threshold=body["threshold"], span_threshold=body["span_threshold"],
                    token_threshold=body.get("token_threshold", 0.5),
                    thresholds_by=body["thresholds_by"],
                    word_odds=odds and WordOdds(odds["hallucinated"], odds["faithful"], tuple(odds["responses"]),
                                                odds["smoothing"]))
        names = model.feature_names()
        for part in names:
            if body[part] is not None:
                setattr(model, part, _saved_linear(path, part, body[part], names[part]))
        if body.get("task_responses"):
            model.task_responses = {task: _saved_linear(path, f"{task} response", saved, names["response"])
                                    for task, saved in body["task_responses"].items()}
        if encoder:
            model.encoders = load_encoders(path.parent, encoder)
        return model


def _saved_linear(path: Path, part: str, saved: dict, names: list[str]) -> Linear:
    if saved["features"] != names:
        raise GroundingError(f"{path}: the {part} model's features are {saved['features']}; this version computes "
                             f"{names}: fit it again with this version")
    return Linear(*(saved[k] for k in ("mean", "scale", "weights", "bias")))


class GroundingError(ValueError):
    pass


def fit(train: list[dict], config: GroundingConfig = WORDS_ONLY, encoders: Encoders | None = None) -> GroundingModel:
    """The regressions the training records allow (thresholds 0.5 until chosen on validation): the unit
    model where some training unit overlaps a gold span, the response model where both labels occur. With
    `config.encoder`, they read the unit encoders fitted on `train` (`fit_unit_encoders`), or `encoders` already
    fitted on records holding `train`."""
    if config.encoder_token_spans == TokenSpans.in_marked_units and not any(r["label"] and r["spans"] for r in train):
        raise GroundingError(f"none of the {len(train)} training records has a gold span, and eval.grounding's "
                             "encoder_token_spans=in_marked_units keeps the marked tokens of the units that a unit "
                             "model fitted on gold spans marks: use anywhere (every run of marked tokens) "
                             "or whole_units")
    model = GroundingModel(sorted({task_type(r) for r in train}), config)
    labels = [int(r["label"]) for r in train]
    held_out = {}
    if config.word_odds and len(set(labels)) == 2:
        model.word_odds, held_out = WordOdds.fit(train, config)
    if config.encoder:
        model.encoders, model.held_out_logits = encoders or unit_encoders(train, config)
    unit_x, unit_y, response_x = [], [], []
    words_only = config.embedder is None and config.lm is None and config.encoder is None   # fast: no progress lines
    for rec in progress(train, desc="grounding features (train)", disable=words_only):
        found, rows, response_row = model.sentence_matrix(rec, held_out.get(WordOdds.source_of(rec)))
        unit_x.append(rows)
        unit_y += gold_sentence_labels(rec, found) if rec["label"] else [0] * len(found)
        response_x.append(response_row)
    if len(set(unit_y)) == 2:           # else no gold spans (SummEdits, say): no spans marked
        model.sentence = Linear.fit(np.concatenate(unit_x), np.array(unit_y), config.c)
    if len(set(labels)) == 2:           # else every record hallucinated (UHGEval): its spans decide
        model.response = Linear.fit(np.array(response_x), np.array(labels), config.c)
        if config.response_by_task:
            model.task_responses = task_responses(train, np.array(response_x), np.array(labels), config.c)
    if model.sentence is None and model.response is None:
        raise GroundingError(f"eval.method=grounding fits on the train split: it needs hallucinated and faithful "
                             f"records there, or gold spans; found labels {sorted(set(labels))} in {len(train)} "
                             f"records and no span")
    model.held_out_logits = None
    return model


def task_responses(train: list[dict], x: np.ndarray, y: np.ndarray, c: float) -> dict[str, Linear]:
    """A response regression per task type whose training records hold both labels (RAGTruth's data-to-text
    responses weigh the features otherwise than its summaries do)."""
    types = np.array([task_type(r) for r in train])
    return {t: Linear.fit(x[types == t], y[types == t], c) for t in sorted(set(types))
            if len(set(y[types == t])) == 2}


CHOOSABLE = ("stem", "negation", "word_odds")    # the flags eval.grounding.choose_among turns on or off


def candidate_config(config: GroundingConfig, candidate: str) -> GroundingConfig:
    """`config` with the flags `candidate` names on ("stem+word_odds") and the other CHOOSABLE ones off."""
    from dataclasses import replace

    named = set() if candidate == "plain" else set(candidate.split("+"))
    unknown = sorted(named - set(CHOOSABLE))
    if unknown:
        raise GroundingError(f"eval.grounding.choose_among: {candidate!r} names {unknown}; expected flags among "
                             f"{list(CHOOSABLE)} joined by '+', or 'plain' for none of them")
    return replace(config, **{flag: flag in named for flag in CHOOSABLE}, choose_among=None)


def choose_features(records: list[dict], config: GroundingConfig, by: str,
                    encoders: Encoders | None = None) -> tuple[GroundingConfig, dict]:
    """The candidate of `config.choose_among` whose response scores rank `records` best (ROC AUC), each record
    scored by a model fitted on the other `config.choose_folds` groups of `by` (data.fold_by), and every
    candidate's AUC. With `encoders` (fine-tuned once on records holding `records`), the inner models read
    them as `cross_fitted_scores`' do: a record its held-out logits, from the encoder that never saw it."""
    from sklearn.metrics import roc_auc_score

    folds = grouped_folds(records, min(config.choose_folds, len(set(map(group_key(by), records)))), by=by)
    labels = [int(r["label"]) for r in records]
    aucs = {}
    for candidate in progress(config.choose_among, desc="choosing features"):
        scored: dict[str, float] = {}
        for fold in folds:
            model = fit(fold["train"] + fold["val"], candidate_config(config, candidate), encoders)
            model.held_out_logits = encoders and encoders[1]
            scored.update({r["id"]: model.scores(r)[0] for r in fold["test"]})
        aucs[candidate] = float(roc_auc_score(labels, [scored[r["id"]] for r in records]))
    best = max(config.choose_among, key=aucs.__getitem__)     # the first listed among equals
    return candidate_config(config, best), {"chosen": best, "roc_auc": aucs, "inner_folds": len(folds), "by": by}


def cross_fitted_scores(records: list[dict], config: GroundingConfig, by: str,
                        encoders: Encoders | None = None) -> dict[str, tuple]:
    """Each record's `GroundingModel.scores` by a model fitted on the records of the other values of `by`
    (a record path: meta.domain). A leave-one-domain-out test part is a domain no model saw; a validation
    split drawn from the training domains is not, and its best threshold is not the test's. With
    `config.encoder`, the regressions are refitted and the unit encoders are not: every model reads `encoders`
    (fitted on `records` by halves of `by`), and a record its held-out logits, from the encoder that never saw
    its value."""
    groups: dict[str, list[dict]] = {}
    for rec in records:
        value = field_value(rec, by)
        if value is None:
            raise GroundingError(f"eval.grounding.cross_fit_by={by}: record {rec.get('id')!r} has no {by}")
        groups.setdefault(str(value), []).append(rec)
    if len(groups) < 2:
        raise GroundingError(f"eval.grounding.cross_fit_by={by}: cross-fitting needs the train and val splits to "
                             f"hold at least 2 values of {by}, found {sorted(groups)}")
    scored = {}
    for value, held in progress(groups.items(), desc=f"cross-fitting by {by}"):
        model = fit([r for other, recs in groups.items() if other != value for r in recs], config, encoders)
        model.held_out_logits = encoders and encoders[1]
        scored.update({r["id"]: model.scores(r) for r in held})
    return scored
