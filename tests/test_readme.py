"""Every command block of the README and of every page in docs/ is accounted for: CI runs it
(`ci:install`, `ci:test` in the README, `ci:demo` on any page), a named test runs it
(`ci:tested-by <file>::<test>`), or it is marked as needing what CI has not got (`ci:skip <reason>`:
GPUs, a cluster, the network, released data, local model weights)."""
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
MARKER = re.compile(r"<!-- ci:(install|demo|run|test|tested-by|skip)\b\s*(.*?)\s*-->")
RUN_BY_CI = {"install", "demo", "run", "test"}
SKIP_REASON = re.compile(r"\b(GPUs?|CUDA|cluster|network|weights|released)\b")


def command_blocks(page: Path = README) -> list[tuple[int, str, str | None, str]]:
    """(line, block text, marker kind or None, marker argument) of every ```bash block of a page."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].strip() == "```bash":
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            m = MARKER.search(before)
            blocks.append((i + 1, "\n".join(lines[i + 1:end]), m and m.group(1), m.group(2) if m else ""))
            i = end
        i += 1
    return blocks


def _blocks() -> list[tuple[str, int, str, str | None, str]]:
    return [(page.relative_to(REPO).as_posix(), *block) for page in PAGES for block in command_blocks(page)]


def test_the_docs_pages_are_read():
    assert len(PAGES) > 5 and any(page == "docs/benchmarks.md" for page, *_ in _blocks())


def test_every_command_block_is_run_or_marked_with_a_reason():
    unmarked = [f"{page}:{line}" for page, line, _, kind, _ in _blocks() if kind is None]
    assert not unmarked, f"command blocks without a <!-- ci:... --> marker: {unmarked}"
    kinds = [kind for _, _, kind, _ in command_blocks()]
    assert kinds.count("install") == kinds.count("test") == 1 and kinds.count("demo") >= 1
    elsewhere = [f"{page}:{line}" for page, line, _, kind, _ in _blocks() if kind in ("install", "test")
                 and page != "README.md"]
    assert not elsewhere, f"ci:install / ci:test belong to the README only: {elsewhere}"
    for page, line, _, kind, arg in _blocks():
        assert kind != "skip" or SKIP_REASON.search(arg), (
            f"{page}:{line}: ci:skip is for what CI has not got (a GPU, a cluster, the network, model "
            f"weights, released data); found {arg!r}. Run anything else at a smaller size in a test (ci:tested-by)")


@pytest.mark.parametrize("page,line,block,arg", [(page, line, block, arg) for page, line, block, kind, arg in _blocks()
                                                 if kind == "tested-by"])
def test_tested_by_names_a_test_that_runs_the_block_command(page, line, block, arg):
    path, _, name = arg.partition("::")
    source = (REPO / path).read_text(encoding="utf-8")
    assert re.search(rf"def {re.escape(name)}\(", source), f"{page}:{line}: no test {arg}"
    body = source[source.index(f"def {name}("):]
    body = body[:body.find("\ndef ", 1) if "\ndef " in body[1:] else len(body)]
    names = re.findall(r"(\w+/\w+)\.py|-m (\w+\.\w+)|\+exp=(\w+)", block)
    stems = {(a or b.replace(".", "/") or c).split("/")[-1] for a, b, c in names} - {"sft"}
    assert stems, f"{page}:{line}: no program or experiment in the block"
    assert any(stem in body for stem in stems), f"{page}:{line}: {arg} runs none of {sorted(stems)}"


def test_the_readme_stays_a_front_door():
    """At most 300 lines: tables beyond the headline ones live in docs/, and every docs page the
    README links to exists."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300, f"README.md has {len(text.splitlines())} lines; move detail to docs/"
    linked = set(re.findall(r"\]\((docs/[^)#]+)", text))
    missing = sorted(page for page in linked if not (REPO / page).is_file())
    assert linked and not missing, missing
