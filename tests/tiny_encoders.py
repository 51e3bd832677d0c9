"""Tiny randomly initialised encoders of each BERT-family architecture the toolkit names (BERT, RoBERTa,
DeBERTa-v3, ModernBERT, XLM-R), each with a tokenizer of its architecture's own kind (WordPiece, byte-level
BPE, SentencePiece-style unigram) and pair format, written as a local model directory: what a user points
`model.name_or_path` at, at a size that trains in seconds. The vocabulary covers the characters of
`text` (every character is a token; words split into them)."""
from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
from transformers import (
    AutoModel,
    BertConfig,
    BertTokenizer,
    DebertaV2Config,
    DebertaV2Tokenizer,
    ModernBertConfig,
    RobertaConfig,
    RobertaTokenizer,
    XLMRobertaConfig,
    XLMRobertaTokenizer,
)
from transformers.convert_slow_tokenizer import bytes_to_unicode
from transformers.tokenization_utils_tokenizers import TokenizersBackend

WINDOW = 512
SIZE = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
ENCODER_TYPES = ("bert", "roberta", "deberta-v2", "modernbert", "xlm-roberta")


def _chars(text: str) -> list[str]:
    return sorted({c for c in text if not c.isspace()})


def _bert(text: str):
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = _chars(text.lower())
    vocab = {t: i for i, t in enumerate([*specials, *chars, *(f"##{c}" for c in chars)])}
    config = BertConfig(vocab_size=len(vocab), max_position_embeddings=WINDOW, type_vocab_size=2, **SIZE)
    return config, BertTokenizer(vocab=vocab)


def _roberta(text: str):
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    vocab = {t: i for i, t in enumerate([*specials, *bytes_to_unicode().values(), "<mask>"])}
    config = RobertaConfig(vocab_size=len(vocab), max_position_embeddings=WINDOW + 2, type_vocab_size=1,
                           pad_token_id=1, bos_token_id=0, eos_token_id=2, **SIZE)
    return config, RobertaTokenizer(vocab=vocab, merges=[])


def _unigram_vocab(text: str, specials: list[str]) -> list[tuple[str, float]]:
    return [*((s, 0.0) for s in specials), ("▁", -2.0), *((c, -3.0) for c in _chars(text))]


def _xlm_roberta(text: str):
    vocab = [*_unigram_vocab(text, ["<s>", "<pad>", "</s>", "<unk>"]), ("<mask>", 0.0)]
    config = XLMRobertaConfig(vocab_size=len(vocab), max_position_embeddings=WINDOW + 2, type_vocab_size=1,
                              pad_token_id=1, bos_token_id=0, eos_token_id=2, **SIZE)
    return config, XLMRobertaTokenizer(vocab=vocab)


def _deberta_v3(text: str):
    vocab = [*_unigram_vocab(text, ["[PAD]", "[CLS]", "[SEP]", "[UNK]"]), ("[MASK]", 0.0)]
    config = DebertaV2Config(vocab_size=len(vocab), max_position_embeddings=WINDOW, type_vocab_size=0,
                             relative_attention=True, position_buckets=64, pos_att_type=["p2c", "c2p"],
                             position_biased_input=False, norm_rel_ebd="layer_norm", share_att_key=True, **SIZE)
    return config, DebertaV2Tokenizer(vocab=vocab, unk_id=3)


def _modernbert(text: str):
    """ModernBERT's tokenizer is a plain `tokenizer.json` (BPE, `[CLS] A [SEP] B [SEP]`, no segment ids)."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = {t: i for i, t in enumerate([*specials, *_chars(text)])}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="[UNK]"))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Split("", behavior="isolated")])
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tokenizer = TokenizersBackend(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                  sep_token="[SEP]", mask_token="[MASK]", model_input_names=["input_ids",
                                                                                             "attention_mask"])
    config = ModernBertConfig(vocab_size=len(vocab), max_position_embeddings=WINDOW, pad_token_id=0,
                              cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3,
                              global_attn_every_n_layers=1, **SIZE)
    return config, tokenizer


BUILDERS = {"bert": _bert, "roberta": _roberta, "deberta-v2": _deberta_v3, "modernbert": _modernbert,
            "xlm-roberta": _xlm_roberta}


def write_tiny_encoder(directory: Path, model_type: str, text: str, seed: int = 0) -> Path:
    config, tokenizer = BUILDERS[model_type](text)
    tokenizer.model_max_length = WINDOW
    torch.manual_seed(seed)
    AutoModel.from_config(config, dtype=torch.float32).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
