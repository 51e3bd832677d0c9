"""Status messages go through `logging` (`logger = logging.getLogger(__name__)` in each module), in one format:
the message alone, on standard output, from INFO up. The Hydra entry points get it from their
`hydra/job_logging: stdout`, which configures the root logger so; the other commands call `configure_logging`.
Reports and tables a user asked for are printed, not logged."""
from __future__ import annotations

import logging
import sys

MESSAGE_FORMAT = "%(message)s"       # as Hydra's `job_logging: stdout`


def configure_logging(level: int = logging.INFO) -> None:
    """The root logger as the Hydra entry points have it, unless something configured it already."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter(MESSAGE_FORMAT))
        root.addHandler(handler)
    root.setLevel(level)
