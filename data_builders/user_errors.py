"""How the command-line entry points report a user's mistake: one line naming the program and
what was wrong (the messages already say file, line, field or config key), exit status 1, no
traceback. Tracebacks are for bugs: `HYDRA_FULL_ERROR=1` (or a CLI's `--debug`) shows them."""
from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable

# Bad records and config values raise ValueError (RecordError, DataError, ModelPathError, ...);
# missing or unreadable files raise OSError.
USER_ERRORS = (ValueError, OSError)


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
                print(f"{program}: error: {e}\n(HYDRA_FULL_ERROR=1 shows the traceback)", file=sys.stderr)
                sys.exit(1)
        return run
    return wrap
