"""Progress on stderr for work that takes a while: only on a terminal, never in --json or a pipe.

A command hands a :class:`Progress` to the run; the run calls ``update("analysis 3/6: ...")`` as
it goes.  Nothing is shown for the first ``delay`` seconds (most commands finish sooner), then
one line is redrawn in place every ``interval`` seconds with the elapsed time, and erased when
the work ends, so the command's own output is what stays on the screen.
"""

from __future__ import annotations

import sys
import threading
import time


class Progress:
    def __init__(self, *, enabled: bool = True, stream=None, delay: float = 2.0, interval: float = 0.5):
        self.stream = sys.stderr if stream is None else stream
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = bool(enabled and isatty is not None and isatty())
        self.delay, self.interval = delay, interval
        self._text = ""
        self._start = time.monotonic()
        self._shown = False
        self._done = threading.Event()
        self._thread = None

    def __enter__(self) -> Progress:
        if self.enabled:
            self._thread = threading.Thread(target=self._run, name="benchcert-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, text: str) -> None:
        self._text = text

    def _run(self) -> None:
        if self._done.wait(self.delay):
            return
        while not self._done.is_set():
            self._draw()
            self._done.wait(self.interval)

    def _draw(self) -> None:
        line = f"{self._text} ... {time.monotonic() - self._start:.0f} s"
        try:
            self.stream.write("\r\033[K" + line[:200])
            self.stream.flush()
            self._shown = True
        except (OSError, ValueError):
            self._done.set()

    def close(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._shown:
            try:
                self.stream.write("\r\033[K")
                self.stream.flush()
            except (OSError, ValueError):
                pass
            self._shown = False
