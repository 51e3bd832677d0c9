"""The floors of the code, as an executable rule: a package imports only the packages below it
(slurm -> train -> eval -> models -> data_builders -> configs: the config schemas and their closed
sets at the bottom). Every import counts, function-local ones too."""
import ast

import pytest

from tests.conftest import REPO

FLOORS = ["slurm", "train", "eval", "models", "data_builders", "configs"]


def _imports(path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module.split(".")[0]))
    return out


def _allowed(package: str) -> set[str]:
    return set(FLOORS[FLOORS.index(package):])


@pytest.mark.parametrize("package", FLOORS)
def test_a_package_imports_only_the_floors_below_it(package):
    wrong = [f"{path.relative_to(REPO)}:{line} imports {top}"
             for path in sorted((REPO / package).rglob("*.py"))
             for line, top in _imports(path) if top in FLOORS and top not in _allowed(package)]
    assert not wrong, "\n".join(wrong)


# Rooms inside a floor: what a sub-package must not import of its own floor (every import counts).
ROOMS = {
    "data_builders/common": ("data_builders",),       # the lowest room: what every floor above uses
    "data_builders/importers": ("data_builders.synthetic",),
    "data_builders/synthetic": ("data_builders.importers",),
    "eval/scorers": ("eval.backends", "eval.baselines", "eval.aggregation"),
    "eval/reports": ("eval.backends", "eval.baselines", "eval.aggregation"),
    "eval/backends": ("eval.baselines", "eval.reports"),
}


def _modules(text: str) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [(node.lineno, node.module)] + [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return out


def room_violations(room: str, files: list[tuple[str, str]]) -> list[str]:
    """`room`'s forbidden imports in `files` ((path, text) pairs): 'path:line imports module'."""
    banned = ROOMS[room]
    return sorted({f"{path}:{line} imports {module}" for path, text in files for line, module in _modules(text)
                   if any(module == b or module.startswith(b + ".") for b in banned)
                   and not module.startswith(room.replace("/", "."))})


@pytest.mark.parametrize("room", ROOMS)
def test_a_room_imports_nothing_its_floor_keeps_above_or_beside_it(room):
    files = [(str(p.relative_to(REPO)), p.read_text(encoding="utf-8")) for p in sorted((REPO / room).rglob("*.py"))]
    assert files, f"{room} has no module"
    assert not room_violations(room, files)


def test_a_planted_violation_is_named():
    planted = [("eval/scorers/planted.py", "def f():\n    from eval.backends.served import Judge\n    return Judge\n"),
               ("data_builders/common/planted.py", "import data_builders.records\n")]
    found = room_violations("eval/scorers", planted[:1])
    assert found == ["eval/scorers/planted.py:2 imports eval.backends.served",
                     "eval/scorers/planted.py:2 imports eval.backends.served.Judge"]
    assert room_violations("data_builders/common", planted[1:]) == ["data_builders/common/planted.py:1 imports "
                                                                    "data_builders.records"]


def command_importers(files: list[tuple[str, str]]) -> list[str]:
    """Imports of train/tools (commands: the memory plan's, benchmarks, checks) by modules outside it."""
    return sorted({f"{path}:{line} imports {module}" for path, text in files if not path.startswith("train/tools/")
                   for line, module in _modules(text) if module == "train.tools" or module.startswith("train.tools.")})


def test_no_module_imports_a_command_of_train_tools():
    files = [(str(p.relative_to(REPO)), p.read_text(encoding="utf-8"))
             for floor in FLOORS for p in sorted((REPO / floor).rglob("*.py"))]
    assert not command_importers(files)
    planted = [("slurm/render.py", "def f():\n    from train.tools.plan import layout\n")]
    assert command_importers(planted) == ["slurm/render.py:2 imports train.tools.plan",
                                          "slurm/render.py:2 imports train.tools.plan.layout"]


def test_every_sub_package_says_in_one_line_what_lives_there():
    for init in sorted(REPO.glob("*/*/__init__.py")) + sorted(REPO.glob("*/*/*/__init__.py")):
        if init.parts[-3] in ("tests", ".venv") or "prompt_texts" in init.parts or ".venv" in init.parts:
            continue
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc, f"{init.relative_to(REPO)} has no docstring"


def name_collisions(paths: list[str]) -> list[str]:
    """Modules named alike for different things: the same file name in two places, or two names of one
    package that differ only by an ending (predict / predictors, score / scoring)."""
    by_name: dict[str, list[str]] = {}
    for path in paths:
        if not path.endswith("/__init__.py"):
            by_name.setdefault(path.rsplit("/", 1)[-1], []).append(path)
    found = [f"{name}: {', '.join(sorted(where))}" for name, where in sorted(by_name.items()) if len(where) > 1]
    by_package: dict[str, list[str]] = {}
    for path in paths:
        package, _, name = path.rpartition("/")
        by_package.setdefault(package, []).append(name.removesuffix(".py"))
    for package, names in sorted(by_package.items()):
        found += [f"{package}: {a} / {b}" for a in sorted(names) for b in sorted(names) if a < b and _alike(a, b)]
    return found


ENDINGS = ("s", "es", "ed", "er", "ner", "ers", "ing", "ion", "ions", "or", "ors")


def _alike(a: str, b: str) -> bool:
    stem = a.removesuffix("e")     # score / scoring
    rest = b[len(stem):]
    return len(stem) >= 3 and b.startswith(stem) and (rest in ENDINGS or rest in tuple("e" + e for e in ENDINGS))


def test_no_two_modules_are_named_alike_for_different_things():
    paths = [str(p.relative_to(REPO)) for floor in FLOORS for p in sorted((REPO / floor).rglob("*.py"))]
    assert not name_collisions(paths)
    planted = ["eval/scorers/summedits.py", "data_builders/importers/summedits.py", "eval/predict.py",
               "eval/predictors.py", "eval/score.py", "eval/scoring.py", "eval/run.py", "eval/runner.py"]
    assert name_collisions(planted) == ["summedits.py: data_builders/importers/summedits.py, eval/scorers/summedits.py",
                                        "eval: predict / predictors", "eval: run / runner",
                                        "eval: score / scoring"]
