"""Polling until checks settle, with a one-line progress display on stderr; clock and sleep injectable."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TextIO

from hyperpod_dpd.clients.checks import Check, Status

Probe = Callable[[], Check]


@dataclass
class Progress:
    """Carriage-return updates on a terminal, one line per poll otherwise."""

    stream: TextIO = field(default_factory=lambda: sys.stderr)
    _dirty: bool = False

    def update(self, elapsed: float, timeout: float, pending: Sequence[Check]) -> None:
        names = ", ".join(f"{c.name} ({c.detail.splitlines()[0] if c.detail else c.status.value})"
                          for c in pending)
        line = f"waiting {elapsed:4.0f}s/{timeout:.0f}s: {names}"
        if self.stream.isatty():
            width = 160
            self.stream.write("\r" + line[:width].ljust(width))
            self._dirty = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self._dirty:
            self.stream.write("\n")
            self.stream.flush()
            self._dirty = False


@dataclass
class Waiter:
    timeout: float
    poll_interval: float = 10.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    progress: Progress | None = None

    def run(self, probes: Sequence[Probe], *, wait: bool = True,
            hints: Callable[[Check], str] | None = None) -> tuple[list[Check], list[Check]]:
        """Run every probe until its check settles or the time is up.

        Returns ``(checks, timed_out)``: the checks in probe order, and those still unsettled (each
        turned into a FAIL whose detail says it timed out and what to look at next).
        """
        start = self.clock()
        results: list[Check | None] = [None] * len(probes)
        while True:
            for index, probe in enumerate(probes):
                current = results[index]
                if current is None or not current.settled:
                    results[index] = probe()
            checks = [c for c in results if c is not None]
            pending = [c for c in checks if not c.settled]
            elapsed = self.clock() - start
            if not pending or not wait or elapsed >= self.timeout:
                break
            if self.progress is not None:
                self.progress.update(elapsed, self.timeout, pending)
            self.sleep(min(self.poll_interval, max(self.timeout - elapsed, 0.0)))
        if self.progress is not None:
            self.progress.done()
        if not wait:
            return checks, []
        finished: list[Check] = []
        timed_out: list[Check] = []
        for check in checks:
            if check.settled:
                finished.append(check)
                continue
            hint = hints(check) if hints else ""
            detail = f"{check.detail}\nstill not ready after {self.timeout:.0f}s{': ' + hint if hint else ''}"
            late = replace(check, status=Status.FAIL, detail=detail, settled=True)
            finished.append(late)
            timed_out.append(late)
        return finished, timed_out
