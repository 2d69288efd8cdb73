# SPDX-License-Identifier: MIT
"""What the harness tells its user while it runs, on stderr: Fail (a run
failed in a way that stops the harness), say (one line), and the progress
line."""
import sys


class Fail(Exception):
    """A run failed in a way that stops the harness (message for the user)."""


def say(msg):
    progress.clear()
    print(msg, file=sys.stderr, flush=True)


class Progress:
    """One status line on stderr: what runs now and how long is left."""

    def __init__(self):
        self.total = 0
        self.done = 0
        self.spent = 0.0
        self.estimate = 0.0
        self.shown = False

    def plan(self, total, per_run):
        self.total, self.done, self.spent, self.estimate = total, 0, 0.0, per_run

    def show(self, what):
        if self.done:
            per = self.spent / self.done
        else:
            per = self.estimate
        left = (self.total - self.done) * per
        line = f"[{self.done + 1}/{self.total}] {what}  (~{int(left) // 60}m{int(left) % 60:02d}s left)"
        if sys.stderr.isatty():
            print(f"\r\033[K{line}", end="", file=sys.stderr, flush=True)
            self.shown = True
        else:
            print(line, file=sys.stderr, flush=True)

    def finished(self, seconds):
        self.done += 1
        self.spent += seconds

    def clear(self):
        if self.shown:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
            self.shown = False


progress = Progress()
