"""The kinds of annotator (`task.kind`), one module each (`generative`, `discriminative`, `spans`):
how a record becomes a training sample and the inputs that judge it (a decoder's prompt, an
encoder's (evidence, response) pairs), how samples are batched, which module is trained and how its
loss is summed, how it predicts and pools, what it refuses in a task's settings, whether its
probabilities are thresholded, what an encoder can train, and how a model card names it: the typed
methods of `kind_spec.Kind`, an abstract class. Every part of the toolkit that differs by kind reads it
from here (`kind_of(task)`), as torchtitan's `TrainSpec` does; a new kind is one new module (a subclass
of `Kind`) and one entry of `KINDS`.
"""
from __future__ import annotations

from configs.choices import TaskKind
from models.kinds import discriminative, generative, span_head
from models.kinds.kind_spec import Kind

KINDS: dict[str, Kind] = {
    TaskKind.generative: generative.KIND,
    TaskKind.discriminative: discriminative.KIND,
    TaskKind.spans: span_head.KIND,
}

__all__ = ["KINDS", "Kind", "kind_of"]


def kind_of(task) -> Kind:
    """The record of `task.kind` (a `task` config, an export's spec, or the kind's name)."""
    return KINDS[getattr(task, "kind", task)]
