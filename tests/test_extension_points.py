"""Where each decision lives (docs/design.md), checked over the code's comparisons: what differs by
task kind is in that kind's module (`models/kinds/`); by scorer, a field of its entry of `SCORERS`
(`eval/scorers/`; a generative kind's labels are its scorer's answers); by template, one of its traits
(`data_builders/model_inputs/prompts.py::traits`); by head, its entry of
`data_builders/model_inputs/head_targets.py`; and the decision `p >= t` is written once
(`eval/thresholds.py`)."""
import ast

import pytest

from tests.conftest import REPO

PACKAGES = ["slurm", "train", "eval", "models", "data_builders", "configs"]
KIND_NAMES = {"generative", "discriminative", "spans"}


def _name(node) -> str | None:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None


def _constants(operands) -> list:
    return [c.value for x in operands for c in ([x] if isinstance(x, ast.Constant) else
                                                 x.elts if isinstance(x, (ast.Tuple, ast.List, ast.Set)) else [])
            if isinstance(c, ast.Constant)]


def _values(node: ast.Compare) -> list:
    """What a value is compared with: both sides of == / !=, the container of in / not in (a key
    looked up in a dict, `"spans" in row`, is no comparison of values)."""
    if not all(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
        return []
    membership = any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
    return node.comparators if membership else [node.left, *node.comparators]


def _compares_kind(node: ast.Compare) -> bool:
    operands = [node.left, *node.comparators]
    return (bool(_values(node)) and any(_name(x) == "kind" and isinstance(x, ast.Attribute) for x in operands)) or \
        bool(KIND_NAMES & {c for c in _constants(_values(node)) if isinstance(c, str)})


def _compares_head(node: ast.Compare) -> bool:
    operands = [node.left, *node.comparators]
    return any(_name(x) == "head" for x in operands) and any(isinstance(c, str) for c in _constants(_values(node)))


def _thresholds(node: ast.Compare) -> bool:
    return any(isinstance(op, ast.GtE) for op in node.ops) and _name(node.comparators[-1]) in ("threshold", "t")


def _compares_scorer(node: ast.Compare) -> bool:
    operands = [node.left, *node.comparators]
    return any(_name(x) == "scorer" for x in operands) and any(isinstance(c, str) for c in _constants(_values(node)))


def _compares_template(node: ast.Compare) -> bool:
    """`template == "prompt_b"`, `task.template == UHGEVAL_KEYWORD`: a template's name against a constant's."""
    values = _values(node)
    named = [x for x in values if isinstance(x, ast.Name) and x.id.isupper()]
    return any(_name(x) == "template" for x in [node.left, *node.comparators]) and bool(
        named or any(isinstance(c, str) for c in _constants(values)))


# configs/rules.py: what a kind or a head refuses of the configuration (its one home, before anything loads)
RULES = {"a task kind compared": (_compares_kind, ("models/kinds/", "configs/rules.py")),
         "a template compared by name": (_compares_template, ("data_builders/model_inputs/",)),
         "a scorer compared by name": (_compares_scorer, ("eval/scorers/", "models/kinds/")),
         "a head compared": (_compares_head, ("models/kinds/", "data_builders/model_inputs/head_targets.py",
                                              "configs/rules.py")),
         "the decision p >= t written again": (_thresholds, ("eval/scorers/decisions.py",))}


def _offences(source: str, rule) -> list[int]:
    return [node.lineno for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Compare) and rule(node)]


@pytest.mark.parametrize("rule", RULES)
def test_a_decision_is_made_only_in_its_home(rule):
    check, homes = RULES[rule]
    found = [f"{path.relative_to(REPO)}:{line}"
             for package in PACKAGES for path in sorted((REPO / package).rglob("*.py"))
             if not str(path.relative_to(REPO)).startswith(homes)
             for line in _offences(path.read_text(encoding="utf-8"), check)]
    assert not found, f"{rule} outside {homes}: " + ", ".join(found)


def test_the_rules_see_what_they_forbid():
    kind, template, scorer, head, decision = (RULES[r][0] for r in RULES)
    assert _offences('if task.kind == "spans": pass', kind) == [1]
    assert _offences('x = name in ("spans", "other")', kind) == [1]
    assert _offences('x = "spans" in row', kind) == []                  # a key of a row
    assert _offences('if kind == "linear": pass', kind) == []            # a scheduler's kind
    assert _offences('if task.head != "binary": pass', head) == [1]
    assert _offences("x = head is None", head) == []
    assert _offences("ok = p >= threshold", decision) == [1]
    assert _offences('if self.spec.scorer == "anah": pass', scorer) == [1]
    assert _offences('x = task.scorer in ("anah", "binary")', scorer) == [1]
    assert _offences("x = scorer(task.scorer).one_sentence", scorer) == []
    assert _offences("if self.task.template == UHGEVAL_KEYWORD: pass", template) == [1]
    assert _offences('x = "prompt_e" if template == "sentence_check" else template', template) == [1]
    assert _offences("x = traits(self.task.template).per_keyword", template) == []
    assert _offences("ok = p >= thresholds_seen", decision) == []


def _signature_drift(kind_class) -> list[str]:
    """The methods of a kind whose parameters differ from `Kind`'s (by name and order)."""
    import inspect

    from models.kinds.kind_spec import Kind

    return [name for name in Kind.__abstractmethods__
            if list(inspect.signature(getattr(kind_class, name)).parameters)
            != list(inspect.signature(getattr(Kind, name)).parameters)]


def test_every_kind_is_a_typed_kind_with_kinds_own_method_signatures():
    import inspect

    from models.kinds import KINDS
    from models.kinds.kind_spec import Kind

    for name, kind in KINDS.items():
        assert isinstance(kind, Kind) and kind.name == name
        assert not _signature_drift(type(kind)), (name, _signature_drift(type(kind)))
    for name in Kind.__abstractmethods__:
        method = getattr(Kind, name)
        params = [p for p in inspect.signature(method).parameters if p not in ("self", "sp")]
        assert "return" in method.__annotations__ and all(p in method.__annotations__ for p in params), \
            f"Kind.{name} is not fully annotated"


def test_the_kind_rules_see_a_missing_method_and_a_drifted_signature():
    from models.kinds.discriminative import Discriminative
    from models.kinds.kind_spec import Kind

    class Incomplete(Kind):
        name, generates, lora_task = "incomplete", False, "SEQ_CLS"

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()

    class Drifted(Discriminative):
        def predict(self, model, tok, inputs, max_new_tokens):      # no `padded`
            return []

    assert _signature_drift(Drifted) == ["predict"]


SCORER_ARITY = {"score": 3, "markdown": 1, "plots": 3, "tables": 1, "summary": 1, "annotation": 2}   # the aliases'


def _scorer_drift(scorer) -> list[str]:
    """The functions of a scorer that take another number of positional parameters than their alias says."""
    import inspect

    return [field for field, n in SCORER_ARITY.items()
            if len([p for p in inspect.signature(getattr(scorer, field)).parameters.values()
                    if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]) != n]


def test_every_scorers_functions_take_what_their_type_aliases_say():
    import typing

    from eval.scorers import SCORERS
    from eval.scorers.scorer_spec import Scorer

    hints = typing.get_type_hints(Scorer)
    assert all(len(typing.get_args(hints[field])[0]) == n for field, n in SCORER_ARITY.items())
    for name, scorer in SCORERS.items():
        assert scorer.name == name and not _scorer_drift(scorer), (name, _scorer_drift(scorer))
    from dataclasses import replace

    planted = replace(SCORERS["binary"], annotation=lambda rec: {})
    assert _scorer_drift(planted) == ["annotation"]
