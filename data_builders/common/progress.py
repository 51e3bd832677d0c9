"""Progress of long work: tqdm's redrawn bar on a terminal; where stderr is a file (a SLURM `.out`, a CI
log) a plain line now and then instead (as HF's Trainer and Lightning log), so that a log holds lines,
not thousands of carriage-return redraws. `HALLU_PROGRESS_EVERY_S` sets the seconds between lines.
Libraries' own bars for a model of one or two files (writing shards, loading weights) are off (`quiet_libraries`)."""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator

from tqdm import tqdm

DEFAULT_EVERY_S = 30.0


def progress(iterable: Iterable | None = None, *, total: int | None = None, desc: str = "", initial: int = 0,
             unit: str = "it", disable: bool = False, stream=None):
    """A tqdm bar on a terminal, a `LineProgress` elsewhere; both take update, set_postfix, close and
    iteration, and work as context managers."""
    stream = stream or sys.stderr
    if disable or stream.isatty():
        return tqdm(iterable, total=total, desc=desc, initial=initial, unit=unit, disable=disable,
                    dynamic_ncols=True, file=stream)
    every_s = float(os.environ.get("HALLU_PROGRESS_EVERY_S", DEFAULT_EVERY_S))
    return LineProgress(iterable, total, desc, initial, unit, every_s, stream)


def quiet_libraries(verbose: bool) -> None:
    """transformers' per-file progress bars (writing shards, loading weights) off unless `verbose`: they say
    nothing about a load of seconds, and in a log they are carriage-return redraws."""
    if not verbose:
        from transformers.utils import logging

        logging.disable_progress_bar()


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class LineProgress:
    """One line at the first update, then at most one every `every_s` seconds, and one at the end:
    done / total, elapsed, rate, time left, and what `set_postfix` last gave."""

    def __init__(self, iterable: Iterable | None, total: int | None, desc: str, initial: int, unit: str,
                 every_s: float, stream):
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)
        self.iterable, self.total, self.desc, self.unit, self.every_s, self.stream = \
            iterable, total, desc, unit, every_s, stream
        self.n = self._start_n = self._shown_n = initial
        self._t0 = self._last = time.monotonic()
        self._postfix: dict = {}
        self._closed = False

    def __iter__(self) -> Iterator:
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if self._shown_n == self._start_n or now - self._last >= self.every_s:
            self._line(now)

    def set_postfix(self, **values) -> None:
        self._postfix = values

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self.n != self._shown_n:
                self._line(time.monotonic())

    def _line(self, now: float) -> None:
        elapsed = now - self._t0
        rate = (self.n - self._start_n) / elapsed if elapsed > 0 else 0.0
        done = f"{self.n}/{self.total} ({100 * self.n / self.total:.0f}%)" if self.total else f"{self.n}"
        left = f", {_clock((self.total - self.n) / rate)} left" if self.total and rate > 0 else ""
        extra = "".join(f", {k} {v}" for k, v in self._postfix.items())
        print(f"{self.desc}: {done}, {_clock(elapsed)} elapsed, {rate:.2f} {self.unit}/s{left}{extra}",
              file=self.stream, flush=True)
        self._last, self._shown_n = now, self.n
