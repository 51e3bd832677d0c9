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
