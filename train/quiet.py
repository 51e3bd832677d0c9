"""Library chatter a user does not need on every run, kept back unless `trainer.verbose=true`:
DeepSpeed's compiler probes (the gcc lines of its async-io check, printed at import by every rank),
and its "deepspeed_shm_comm_op built successfully" (every rank, at init). transformers' per-file progress
bars are `data_builders/common/progress.py::quiet_libraries`."""
from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def held_stdout(verbose: bool) -> Iterator[None]:
    """Drop what is written to standard output meanwhile (at the file descriptor: the probes print
    past Python's sys.stdout), unless `verbose`. Errors still raise, and standard error still shows."""
    if verbose:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 1)
        try:
            yield
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)

