"""The floors of the code, as an executable rule: a package imports only the packages below it
(slurm -> train -> eval -> models -> data_builders, with the config schemas in `configs` at the
bottom beside data_builders). Every import counts, function-local ones too."""
import ast

import pytest

from tests.conftest import REPO

FLOORS = ["slurm", "train", "eval", "models", "data_builders"]
BOTTOM = {"configs": {"data_builders"}, "data_builders": set()}     # what the bottom floor may import


def _imports(path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module.split(".")[0]))
    return out


def _allowed(package: str) -> set[str]:
    if package in BOTTOM:
        return {package} | BOTTOM[package]
    return set(FLOORS[FLOORS.index(package):]) | {"configs"}


@pytest.mark.parametrize("package", [*FLOORS, "configs"])
def test_a_package_imports_only_the_floors_below_it(package):
    project = set(FLOORS) | {"configs"}
    wrong = [f"{path.relative_to(REPO)}:{line} imports {top}"
             for path in sorted((REPO / package).rglob("*.py"))
             for line, top in _imports(path) if top in project and top not in _allowed(package)]
    assert not wrong, "\n".join(wrong)
