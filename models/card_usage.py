"""The model card's plain-`transformers` snippet, correct for the export's kind: the input built the
way the annotator builds it, the head read the way it reads it, the decision at its threshold.

An encoder (no chat template) reads the (evidence, response) pair in its own pair format; its snippet
needs nothing but `transformers`. A decoder reads the toolkit's chat prompt, so its snippet renders it
with the toolkit (`data_builders.model_inputs.collate.prompt_text`) and runs the model with `transformers`. A
sentence-level annotator retrieves each sentence's evidence first: its card shows the Python API.
Tests run the snippets and compare them with `eval.annotate` (tests/test_span_annotators.py,
tests/test_annotate.py).
"""
from __future__ import annotations

import json
from pathlib import Path

from models.kinds import kind_of

# The first lines of every snippet; a test replaces the quoted placeholders by real values.
INPUTS = ('export = "THIS_DIR"  # this directory\n'
          'source = "SOURCE"  # retrieved passages: their texts joined by "\\n"\n'
          'response = "RESPONSE"\n'
          'question = None  # the question, where the response answers one\n')


def has_chat_template(directory: str | Path) -> bool:
    d = Path(directory)
    config = d / "tokenizer_config.json"
    return (d / "chat_template.jinja").is_file() or (
        config.is_file() and bool(json.loads(config.read_text(encoding="utf-8")).get("chat_template")))


def usage_snippet(spec, directory: str | Path) -> str:
    """Python code for the card (the spec is an `AnnotatorSpec`)."""
    threshold, kind = (spec.threshold if spec.threshold is not None else 0.5), kind_of(spec)
    if spec.evidence_sentences:
        return _sentence_level(spec)
    if not has_chat_template(directory):
        return _encoder_spans(threshold) if kind.token_probs else _encoder_binary(threshold)
    if kind.generates:
        return _decoder_generative(spec)
    if kind.thresholded(spec) and not kind.token_probs:      # a binary head on the last prompt token
        return _decoder_binary(spec, threshold)
    return _sentence_level(spec)


def _encoder_binary(threshold: float) -> str:
    return INPUTS + f'''import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained(export)
model = AutoModelForSequenceClassification.from_pretrained(export, dtype=torch.float32).eval()  # as on a CPU
evidence = f"{{question}}\\n\\n{{source}}" if question else source
# Up to the encoder's window (512 tokens); eval.annotate splits a longer evidence into chunks and
# keeps the lowest hallucination probability over them.
pair = tokenizer(evidence, response, return_tensors="pt")
with torch.no_grad():
    p = model(**pair).logits.float().softmax(-1)[0, 1].item()
label = "hallucinated" if p >= {threshold!r} else "faithful"
'''


def _encoder_spans(threshold: float) -> str:
    return INPUTS + f'''import torch
from transformers import AutoModelForTokenClassification, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained(export)
model = AutoModelForTokenClassification.from_pretrained(export, dtype=torch.float32).eval()  # as on a CPU
evidence = f"{{question}}\\n\\n{{source}}" if question else source
# Up to the encoder's window (512 tokens); eval.annotate splits a longer evidence into chunks and
# keeps each response token's lowest hallucination probability over them.
pair = tokenizer(evidence, response, return_offsets_mapping=True, return_tensors="pt")
offsets = pair.pop("offset_mapping")[0].tolist()
with torch.no_grad():
    probs = model(**pair).logits.float().softmax(-1)[0, :, 1].tolist()
tokens = [(a, b, p) for (a, b), segment, p in zip(offsets, pair.sequence_ids(0), probs) if segment == 1 and b > a]
spans, flagged = [], False          # runs of tokens at or over the threshold: [start, end) in the response
for a, b, p in tokens:
    if p >= {threshold!r}:
        if flagged:
            spans[-1][1] = b
        else:
            spans.append([a, b])
    flagged = p >= {threshold!r}
label = "hallucinated" if spans else "faithful"
'''


def _record_lines(spec) -> str:
    return (f'record = {{"source": source, "response": response, "language": {json.dumps(spec.language)},\n'
            f'          "task": "qa" if question else "summarization",\n'
            f'          **({{"question": question}} if question else {{}})}}\n'
            f'text = prompt_text(record, tokenizer, {json.dumps(spec.template)})\n'
            'prompt = tokenizer(text, add_special_tokens=False, return_tensors="pt")\n')


def _decoder_binary(spec, threshold: float) -> str:
    return INPUTS + f'''import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from data_builders.model_inputs.collate import prompt_text      # the toolkit's prompt ({spec.template}): pip install it

tokenizer = AutoTokenizer.from_pretrained(export)
model = AutoModelForSequenceClassification.from_pretrained(export, dtype=torch.float32).eval()  # as on a CPU
{_record_lines(spec)}with torch.no_grad():
    p = model(**prompt).logits.float().softmax(-1)[0, 1].item()     # the head reads the last prompt token
label = "hallucinated" if p >= {threshold!r} else "faithful"
'''


def _decoder_generative(spec) -> str:
    return INPUTS + f'''import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from data_builders.model_inputs.collate import prompt_text      # the toolkit's prompt ({spec.template}): pip install it

tokenizer = AutoTokenizer.from_pretrained(export)
model = AutoModelForCausalLM.from_pretrained(export, dtype=torch.float32).eval()  # as on a CPU
{_record_lines(spec)}out = model.generate(**prompt, do_sample=False, max_new_tokens={spec.max_new_tokens})
answer = tokenizer.decode(out[0, prompt["input_ids"].shape[1]:], skip_special_tokens=True)
# eval.annotate reads the answer into label, spans, correction and reason.
'''


def _sentence_level(spec) -> str:
    how = (f"each response {spec.evidence_unit} against its retrieved evidence" if spec.evidence_sentences
           else "its prompt and its head, as eval.annotate reads them")
    return INPUTS + f'''from eval.annotate import Annotator      # the toolkit: {how}

annotator = Annotator.load(export)
row = annotator.annotate(source, response, question)       # label, score, spans
spans = annotator.predict(context=[source], question=question, answer=response)
'''
