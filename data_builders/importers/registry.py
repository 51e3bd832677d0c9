"""One registered importer per released dataset: its name, its help, its own command-line
arguments and how it reads the files into splits of records. `python -m data_builders.convert`
builds one sub-command per entry and has no per-dataset code; a dataset module registers itself
with `@importer(...)`, and convert imports it (`IMPORTER_MODULES`)."""
from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

Splits = dict[str, list[dict]]
Read = Callable[[argparse.Namespace], tuple[Splits, str]]


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    pass


@dataclass(frozen=True)
class Importer:
    name: str
    help: str                 # what files it reads, one line for `convert --help`
    read: Read                # args -> ({split: records}, a report of what it read)
    arguments: Callable[[argparse.ArgumentParser], None] = _no_arguments


IMPORTERS: dict[str, Importer] = {}


def importer(name: str, help: str, arguments: Callable[[argparse.ArgumentParser], None] = _no_arguments
             ) -> Callable[[Read], Read]:
    """Register the decorated `read(args)` as the importer `name`."""
    def register(read: Read) -> Read:
        if name in IMPORTERS:
            raise ValueError(f"importer {name!r} is registered twice")
        IMPORTERS[name] = Importer(name, help, read, arguments)
        return read
    return register


def one_split(rows: list[dict], split: str) -> tuple[Splits, str]:
    """A dataset without splits: every record in `split`, with the counts the report gives."""
    n_hallu = sum(r.get("label") == 1 for r in rows)
    report = f"{len(rows)} records ({n_hallu} hallucinated, {len(rows) - n_hallu} faithful)"
    untyped = sum(r.get("label") == 1 and r.get("faithfulness_labels") == [] for r in rows)
    if untyped:
        report += (f"\n{untyped} hallucinated records have no Intrinsic / Extrinsic label in their annotations: "
                   "their faithfulness_labels are empty")
    return {split: rows}, report + span_report(rows)


def span_report(rows: list[dict]) -> str:
    """How many annotated spans the records carry, and how many could not be located in their response."""
    n = sum(len(r.get("spans") or []) for r in rows)
    if not n and not any("spans" in r for r in rows):
        return ""
    lost = sum((r.get("meta") or {}).get("unlocated_spans", 0) for r in rows)
    return f"\n{n} annotated spans located in their responses; {lost} not found there (left out of spans)"
