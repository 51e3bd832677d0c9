"""How the command-line entry points report a user's mistake: one line naming the program and
what was wrong (the messages already say file, line, field or config key), exit status 1, no
traceback. Tracebacks are for bugs: `HYDRA_FULL_ERROR=1` shows them.

Under torchrun every rank meets the same error (the checks run before any process group, and an
error of the main rank is raised on every rank: `train.distributed.on_main_rank`), so one rank of
each node prints it; the others exit with the same status, quietly."""
from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

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
                _report(f"{program}: error: {_message(e)}")
                if _launch_dir() is not None:     # every rank of the node at once, before torchrun stops them
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(1)
                sys.exit(1)
        return run
    return wrap


def _message(e: Exception) -> str:
    if isinstance(e, MissingMandatoryValue):
        return f"{e.full_key} is required and not set: add {e.full_key}=<value> to the command"
    return str(e)


def _report(line: str) -> None:
    """Print `line` once per node. Under torchrun the ranks of a node share its launch directory,
    and torchrun stops them all as soon as one exits: so each rank says it has failed, the first
    to claim the message waits for the others (they meet the same error within seconds), prints it
    and lets them go, and all of them exit at once with status 1 (see `reports_user_errors`)."""
    launch = _launch_dir()
    if launch is None:
        if os.environ.get("LOCAL_RANK", "0") == "0":
            _print(line)
        return
    (launch / f"user_error.{os.environ.get('LOCAL_RANK', '0')}").touch()
    printed = launch / "user_error.printed"
    try:
        os.close(os.open(launch / "user_error.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        _wait_until(printed.exists)
        return
    ranks = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    _wait_until(lambda: len(list(launch.glob("user_error.[0-9]*"))) >= ranks)
    _print(line)
    _tell_torchrun(line)
    printed.touch()


def _print(line: str) -> None:
    print(f"{line}\n(HYDRA_FULL_ERROR=1 shows the traceback)", file=sys.stderr, flush=True)


def _launch_dir() -> Path | None:
    """The directory torchrun made for this launch on this node (each rank's error file lies in
    <launch dir>/<local rank>/error.json), or None outside torchrun."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    return Path(path).parent.parent if path and Path(path).parent.parent.is_dir() else None


def _wait_until(done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + QUIET_RANK_WAIT_S
    while not done() and time.monotonic() < deadline:
        time.sleep(0.005)


def _tell_torchrun(message: str) -> None:
    """torchrun's failure summary shows a rank's error file as its root cause (else a link)."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"message": message, "timestamp": int(time.time())}, f)
