"""How the command-line entry points report a user's mistake: one line naming the program and
what was wrong (the messages already say file, line, field or config key), exit status 1, no
traceback. Tracebacks are for bugs: `HYDRA_FULL_ERROR=1` shows them.

Under torchrun every rank meets the same error (the checks run before any process group, and an
error of the main rank is raised on every rank: `train.distributed.on_main_rank`), so only the
first rank of each node prints it; the others exit with the same status, quietly."""
from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Callable

from omegaconf.errors import MissingMandatoryValue

# Bad records and config values raise ValueError (RecordError, DataError, ModelPathError, ...);
# missing or unreadable files raise OSError; a required key left unset, MissingMandatoryValue.
USER_ERRORS = (ValueError, OSError, MissingMandatoryValue)
QUIET_RANK_WAIT_S = 10


def reports_user_errors(program: str) -> Callable:
    """Decorate an entry point so that a user error ends it with one line on stderr and status 1."""
    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def run(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except USER_ERRORS as e:
                if os.environ.get("HYDRA_FULL_ERROR") == "1":
                    raise
                if os.environ.get("LOCAL_RANK", "0") == "0":
                    line = f"{program}: error: {_message(e)}"
                    print(f"{line}\n(HYDRA_FULL_ERROR=1 shows the traceback)", file=sys.stderr, flush=True)
                    _tell_torchrun(line)
                else:   # torchrun stops the other ranks when one exits: let the printing rank go first
                    time.sleep(QUIET_RANK_WAIT_S)
                sys.exit(1)
        return run
    return wrap


def _message(e: Exception) -> str:
    if isinstance(e, MissingMandatoryValue):
        return f"{e.full_key} is required and not set: add {e.full_key}=<value> to the command"
    return str(e)


def _tell_torchrun(message: str) -> None:
    """torchrun's failure summary shows a rank's error file as its root cause (else a link)."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"message": message, "timestamp": int(time.time())}, f)
