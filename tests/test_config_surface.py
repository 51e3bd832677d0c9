"""The config surface is frozen: every public key of the three entry schemas (training and
`eval/run.py`, `eval/score.py`, `eval.annotate`), with its type, is listed in
`tests/config_surface.txt`. A new, renamed or retyped key fails here until that list is edited
on purpose (and docs/config.md says what the key does)."""
import dataclasses
import typing
from enum import Enum

from configs.schema import AnnotateConfig, ScoreConfig, SFTConfig
from tests.conftest import REPO

SURFACE = REPO / "tests" / "config_surface.txt"
SCHEMAS = {"sft": SFTConfig, "score": ScoreConfig, "annotate": AnnotateConfig}


def _type_name(t) -> str:
    if isinstance(t, type) and issubclass(t, Enum):
        return f"{t.__name__}({'|'.join(m.value for m in t)})"
    return getattr(t, "__name__", None) if isinstance(t, type) else str(t).replace("typing.", "")


def surface_lines(cls, prefix: str) -> list[str]:
    hints = typing.get_type_hints(cls)
    lines = []
    for f in dataclasses.fields(cls):
        t = hints[f.name]
        if dataclasses.is_dataclass(t):
            lines += surface_lines(t, f"{prefix}{f.name}.")
        else:
            lines.append(f"{prefix}{f.name}: {_type_name(t)}")
    return lines


def current_surface() -> list[str]:
    return [line for name, cls in SCHEMAS.items() for line in surface_lines(cls, f"{name}: ")]


def test_the_config_surface_is_the_listed_one():
    listed = [x for x in SURFACE.read_text(encoding="utf-8").splitlines() if x and not x.startswith("#")]
    now = current_surface()
    added, removed = sorted(set(now) - set(listed)), sorted(set(listed) - set(now))
    assert not added and not removed, (
        f"the config surface changed: new {added}, gone {removed}. If on purpose, write the new list with "
        "`python -m tests.test_config_surface > tests/config_surface.txt` and say what the key does in docs/config.md")


def test_the_surface_sees_a_new_key():
    @dataclasses.dataclass
    class WithExtra(SFTConfig):
        extra_knob: int = 0

    assert "sft: extra_knob: int" in surface_lines(WithExtra, "sft: ")
    assert "sft: extra_knob: int" not in current_surface()


if __name__ == "__main__":
    print("# The public config keys and their types (tests/test_config_surface.py); regenerate on purpose only.")
    print("\n".join(current_surface()))
