"""Table-driven tests of the ANAH annotation and binary answer parsers."""
import pytest

from eval.scorers.parsers import parse_anah_annotation, parse_binary_answer


@pytest.mark.parametrize("text, kind, reference, rewrite", [
    ("<幻觉>无<参考>奥马尔·海亚姆是波斯诗人。", "none", ["奥马尔·海亚姆是波斯诗人。"], None),
    ("<参考>他生于1048年。<SEP>卒于1131年。<幻觉>矛盾<改正>\"1050年\"改为\"1048年\"", "contradictory",
     ["他生于1048年。", "卒于1131年。"], ("1050年", "1048年")),
    ("<幻觉>无法验证。<参考>无相关内容<改正>将\"他喜欢猫\"改为\"\"", "unverifiable", ["无相关内容"], ("他喜欢猫", "")),
    ("<Reference> Omar Khayyam was a Persian poet. <Hallucination> None", "none",
     ["Omar Khayyam was a Persian poet."], None),
    ('<Hallucination> Contradictory <Reference> born in 1048 <SEP> died 1131 '
     '<Correction> "1050" to "1048"', "contradictory", ["born in 1048", "died 1131"], ("1050", "1048")),
    ('<Hallucination> Unverifiable. <Correction> "He loved cats" to ""', "unverifiable", [], ("He loved cats", "")),
    ("<No Fact>", "no_fact", [], None),
    ("<幻觉>无 <参考>x ... 注：此句<无事实>", "no_fact", [], None),          # <No Fact> anywhere wins
    ("<hallucination>none<reference>a<sep>b", "none", ["a", "b"], None),
])
def test_anah_annotations(text, kind, reference, rewrite):
    a = parse_anah_annotation(text)
    assert a is not None and (a.type, a.reference, a.rewrite) == (kind, reference, rewrite)


@pytest.mark.parametrize("text", [
    "", "这句话没有问题。", "<幻觉>可能", "<Hallucination> maybe", "<参考>只有参考没有类型", None,
])
def test_anah_rejected(text):
    assert parse_anah_annotation(text) is None


@pytest.mark.parametrize("text, label", [
    ("Yes", 1), ("yes, the answer is hallucinated.", 1), ("No.", 0), ("**No**", 0),
    ("Answer: no", 0), ("True", 1), ("The response is faithful to the documents.", 0),
    ("The answer contains a hallucination.", 1), ("是", 1), ("否", 0), ("有幻觉", 1), ("无幻觉", 0),
    ("回答：不存在幻觉。", 0), ("结论：存在幻觉", 1), ("该回答没有幻觉。", 0),
])
def test_binary_answers(text, label):
    assert parse_binary_answer(text) == label


@pytest.mark.parametrize("text", [
    "", "maybe", "I cannot tell.", "有幻觉还是无幻觉很难说", "Yes and no.", None,
])
def test_binary_rejected(text):
    assert parse_binary_answer(text) is None
