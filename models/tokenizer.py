"""An offline byte-level BPE tokenizer for Chinese and English with a ChatML template.

Trained deterministically on text the project generates, so no hub download
is needed. Tokens hold at most three CJK characters, which keeps token counts
close to those of Qwen's tokenizer on Chinese prose.
"""
from __future__ import annotations

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
ENGLISH_SAMPLE = (
    "The annotator reads the source document and the answer, finds the reference "
    "fragment, and decides whether each sentence is supported, contradictory, "
    "unverifiable, or states no fact. Hallucination detection for long documents "
    "needs the whole context; summaries must stay faithful to the article. "
    "Question: Who wrote the letter? Answer: The teacher wrote it in 1998. "
)


def training_texts() -> list[str]:
    from data_builders.model_inputs.prompts import TYPE_ZH, system_prompt
    from data_builders.synthetic.novel_corpus import generate_corpus

    units = generate_corpus(n_books=6, units_per_book=20, seed=12345)
    texts = [t for u in units for t in (u.text, u.summary, u.faithful_summary,
                                          u.hallucinated_summary, u.reason, u.correction)]
    # fixed inputs: any change here changes the tokenizer (bump models.builders.BUILD_VERSION)
    texts += [system_prompt("prompt_e")] + list(TYPE_ZH.values())
    texts += ['{"has_hallucination": "有幻觉", "details": [{"hallucination_type": "实体幻觉", '
              '"hallucinated_sentence": "", "corrected_content": "", "reason": ""}]}'] * 20
    texts += [ENGLISH_SAMPLE] * 20
    return texts


def build_tokenizer(vocab_size: int = 8000) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, max_token_length=9,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(training_texts(), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        bos_token=None, unk_token=None, chat_template=CHAT_TEMPLATE,
        additional_special_tokens=SPECIAL_TOKENS[1:], model_max_length=131072)
