"""Detection prompts of LongNovel (seed 000, Appendix I.2) and the JSON target they ask for."""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

TYPE_ZH = {
    "entity": "实体幻觉", "numerical": "数字幻觉", "relation": "关系幻觉",
    "logical_inversion": "反向陈述", "event": "事件幻觉", "temporal": "时间线乱序",
    "causal": "因果链伪造", "event_fabrication": "虚构事件",
}
ZH_TYPE = {v: k for k, v in TYPE_ZH.items()}
HALLUCINATED, FAITHFUL = "有幻觉", "无幻觉"
TEMPLATES = ("prompt_e", "prompt_b", "cot")   # Figs. 19, 20, 21
SENTENCE_CHECK = "sentence_check"   # one response sentence against its evidence (model_inputs/evidence.py)
# SummEdits' standard zero-shot prompt (Laban et al. 2023, Apache-2.0): is the summary consistent with
# the document, "Yes" or "No" first. A judge's prompt for any response against its source (FaithBench
# summaries, RAGTruth responses); "Yes" means faithful (eval.scorers.parsers.parse_consistency_answer).
CONSISTENCY = "consistency"
# UHGEval's keyword-level question (IAAR-Shanghai/UHGEval, is_kw_hallucinated.txt, Apache-2.0): is one
# keyword of a news continuation true to reality; the answer starts "不符合现实" (hallucinated) or "符合现实".
UHGEVAL_KEYWORD = "uhgeval_keyword"


@dataclass(frozen=True)
class PromptTraits:
    """What the rest of the toolkit reads of a template besides its text (`traits`), so that no module
    outside this package compares template names."""
    completion: bool = False          # read as plain text, without the chat template, as its benchmark's own code
                                      # gives it (UHGEval's local models: `tokenizer.encode(query)`); a served judge
                                      # gets the text as one user message
    per_keyword: bool = False         # one question per keyword of the response (UHGEval), pooled into its row
    yes_means_faithful: bool = False  # a judge's answer starts Yes or No, Yes for faithful (SummEdits' question)
    length_template: str | None = None   # the template whose prompt length puts a record in its length bucket


TRAITS = {
    SENTENCE_CHECK: PromptTraits(length_template="prompt_e"),    # S / M / L hold the same records as whole-document
    CONSISTENCY: PromptTraits(yes_means_faithful=True),
    UHGEVAL_KEYWORD: PromptTraits(completion=True, per_keyword=True),
}


def traits(template: str) -> PromptTraits:
    return TRAITS.get(template, PromptTraits())


@cache
def system_prompt(template: str) -> str:
    if template not in TEMPLATES:
        raise ValueError(f"unknown detection prompt {template!r}; expected one of {list(TEMPLATES)}")
    # Prompt-B shares Prompt-E's system text; only the order of summary and article differs
    name = f"longnovel_{'prompt_e' if template == 'prompt_b' else template}.system.txt"
    return resources.files("data_builders.prompt_texts").joinpath(name).read_text(encoding="utf-8").strip()


def article_of(record: dict) -> str:
    return record["source"] if "source" in record else "\n\n".join(record["documents"])


def detection_messages(record: dict, template: str = "prompt_e") -> list[dict]:
    """Chat messages of Prompt-E / CoT (summary after the article) or Prompt-B (summary first)."""
    article, summary = f"文章: {article_of(record)}", f"摘要: {record['response']}"
    user = f"{summary}\n\n{article}" if template == "prompt_b" else f"{article}\n\n{summary}"
    return [{"role": "system", "content": system_prompt(template)}, {"role": "user", "content": user}]


def verdict_target(record: dict) -> str:
    """The JSON answer the prompt asks for, built from the record's gold fields."""
    if record.get("label") not in (0, 1):
        raise ValueError(f"record {record.get('id')!r}: a training target needs label 0 or 1")
    if record["label"] == 0:
        return json.dumps({"has_hallucination": FAITHFUL, "details": []}, ensure_ascii=False)
    types = record.get("hallucination_types") or []
    sentences = record.get("hallucinated_sentences") or []
    corrections = record.get("corrections") or []
    reasons = record.get("reasons") or []
    details = [{
        "hallucination_type": TYPE_ZH[types[i]] if i < len(types) else "",
        "hallucinated_sentence": sentence,
        "corrected_content": corrections[i] if i < len(corrections) else "",
        "reason": reasons[i] if i < len(reasons) else "",
    } for i, sentence in enumerate(sentences)]
    return json.dumps({"has_hallucination": HALLUCINATED, "details": details}, ensure_ascii=False)


@cache
def _consistency_prompt() -> str:
    return resources.files("data_builders.prompt_texts").joinpath("summedits_zero_shot.txt").read_text(
        encoding="utf-8").strip()


def consistency_messages(record: dict) -> list[dict]:
    """SummEdits' zero-shot prompt with the record's source as the document and its response as the summary."""
    return [{"role": "user", "content": _consistency_prompt().replace("[ARTICLE]", article_of(record))
             .replace("[SUMMARY_SENTENCES]", record["response"])}]


def consistency_target(record: dict) -> str:
    if record.get("label") not in (0, 1):
        raise ValueError(f"record {record.get('id')!r}: a training target needs label 0 or 1")
    return "No" if record["label"] == 1 else "Yes"


def template_for(record: dict, default: str) -> str:
    """A record of a training mixture may carry its own template (`meta.template`)."""
    return (record.get("meta") or {}).get("template") or default


def render_messages(record: dict, template: str) -> list[dict]:
    """The chat prompt of `template`: LongNovel detection (`prompt_e`), ANAH annotation (`anah_*`), a
    sentence against its evidence (`sentence_check`), SummEdits' zero-shot question (`consistency`) or
    UHGEval's question about one keyword (`uhgeval_keyword`)."""
    template = template_for(record, template)
    if template.startswith("anah_"):
        from data_builders.model_inputs.anah_prompts import annotation_messages
        return annotation_messages(record, template)
    if template == SENTENCE_CHECK:
        from data_builders.model_inputs.evidence import sentence_check_messages
        return sentence_check_messages(record)
    if template == CONSISTENCY:
        return consistency_messages(record)
    if template == UHGEVAL_KEYWORD:
        from data_builders.importers.uhgeval import keyword_messages
        return keyword_messages(record)
    return detection_messages(record, template)


def render_target(record: dict, template: str) -> str:
    """The answer a generative annotator is trained to give under `template`."""
    template = template_for(record, template)
    if template.startswith("anah_"):
        from data_builders.model_inputs.anah_prompts import annotation_target
        return annotation_target(record, template)
    if template == CONSISTENCY:
        return consistency_target(record)
    return verdict_target(record)
