"""The run's progress bar on stderr: done/total, rate, errors and cache hits.

Shown only when asked for and stderr is a terminal (CI logs and pytest output stay
clean). Counting is always on, so the same object answers "how many so far" either way:
per category of the run's tally (medrcube/tally.py `CATEGORIES`: answered, cached,
failed, not asked, unavailable), the counters every output of the run names.
"""

from __future__ import annotations

import sys
from typing import Any

from medrcube.tally import CATEGORIES


class Progress:
    """A thin wrapper over tqdm that also keeps the counts when no bar is shown."""

    def __init__(self, total: int, *, enabled: bool = True, desc: str = "", stream: Any = None):
        self.total = total
        self.done = 0
        self.errors = 0  # failed + not asked
        self.cached = 0
        self.by: dict[str, int] = dict.fromkeys(CATEGORIES, 0)
        stream = stream if stream is not None else sys.stderr
        isatty = getattr(stream, "isatty", None)
        self._bar = None
        if enabled and callable(isatty) and isatty():
            from tqdm import tqdm

            self._bar = tqdm(
                total=total,
                desc=desc,
                unit="ask",
                file=stream,
                dynamic_ncols=True,
                mininterval=0.2,
                smoothing=0.1,
            )

    def begin(self, total: int) -> None:
        """A new pass over `total` asks (a caller-owned Progress reused across passes:
        the counts restart, so that done/total stays the pass's)."""
        self.total = total
        self.done = self.errors = self.cached = 0
        self.by = dict.fromkeys(CATEGORIES, 0)
        if self._bar is not None:
            self._bar.reset(total=total)

    @property
    def shown(self) -> bool:
        return self._bar is not None

    def advance(self, n: int = 1, *, error: bool = False, cached: bool = False, stopped: bool = False,
                unavailable: bool = False) -> None:
        """`n` asks done: answered (no flag), from the store (`cached`), failed (`error`),
        not asked because the run stopped (`stopped`), or unavailable."""
        if n <= 0:
            return
        self.done += n
        if error or stopped:
            self.errors += n
        if cached:
            self.cached += n
        which = ("unavailable" if unavailable else "not_asked" if stopped else "failed" if error
                 else "cached" if cached else "answered")
        self.by[which] += n
        if self._bar is not None:
            # refresh=False: the postfix is drawn with the next (rate-limited) refresh,
            # so a fast run does not pay for a redraw per response.
            self._bar.set_postfix(errors=self.errors, cached=self.cached, refresh=False)
            self._bar.update(n)

    def note(self, message: str) -> None:
        """A line beside the counts (the runner's no-progress warning), where a bar is shown."""
        if self._bar is not None:
            self._bar.write(message, file=sys.stderr)

    def set_description(self, desc: str) -> None:
        if self._bar is not None:
            self._bar.set_description(desc)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
