"""What every way of running an annotator provides (`Backend`): rows for records. In this process
(`in_process.InProcess`), by vLLM (`vllm.Vllm`), or by a served model (`served.Served`)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

Row = dict[str, Any]                 # {"id", "output"} (generations), {"id", "probs"} (a head), + "token_probs"
Write = Callable[[Row], None]        # sees each row as soon as it is done


class Backend(Protocol):
    def rows(self, records: list[dict], progress: bool, on_result: Write | None) -> list[Row]:
        """One row per record, in record order (on every process that asks)."""
        ...


def output_rows(records: list[dict], outputs: list[str], on_result: Write | None) -> list[Row]:
    """One {"id", "output"} row per record, each handed to `on_result` as well."""
    rows = [{"id": r["id"], "output": o} for r, o in zip(records, outputs)]
    for row in rows:
        if on_result is not None:
            on_result(row)
    return rows
