"""Where a MaxText run's time went besides its steps, read from the lines MaxText and Orbax print.

What MaxText 0.2.5 (and Orbax 0.12 beside it) write, each line behind an absl prefix
(``I1129 01:15:43.904343 140544310070144 checkpointing.py:705] ``):

- **TPU initialisation**, measured between two lines' times:
  ``Attempting to initialize the jax distributed system for TPU backend...`` to
  ``Jax distributed system initialized on TPUs!`` (``max_utils.py``: every host joining the
  distributed system), and ``Num_devices: N, shape (...)`` (the mesh, at the start of
  ``setup_train_loop``'s TPU_INIT block) to ``Checkpoint manager created!`` or ``Checkpointing
  disabled, not creating checkpoint manager.`` (the block's end: model, optimizer and
  checkpoint manager set up);
- **checkpoint saves and restores**: Orbax's checkpoint-manager record, the very figures
  ml-goodput-measurement sums for its checkpoint buckets: ``{'step': 8, 'event_type': 'save',
  ..., 'checkpoint_manager_blocking_duration_secs': 0.0159}`` (the part of a save that blocks
  training) and ``{'step': 8, 'event_type': 'restore', ..., 'checkpoint_manager_duration_secs':
  0.5277}``. A log without those records (an older Orbax; parameters loaded from a path) has
  Orbax's timing lines instead: ``[process=0] [async] Finished blocking save in 0.56 seconds.
  Continuing save @ ...``, ``[process=0] [sync] Finished save in 1.20 seconds @ ...`` and
  ``[process=0] [sync] Finished load in 0.53 seconds @ ...``; they count only for a kind the
  records never spoke of;
- **waiting for data**: ``Failed to get next data batch due to <error>, retrying``
  (``multihost_dataloading.py``; MaxText then sleeps 10 s and tries again): the wait lasts from
  that line to the next line of the same thread (the absl prefix's thread id).

Cheap on long logs: a block of whole lines is searched for a few fixed substrings
(``str.find``), and only the lines holding one are cut out and parsed. Between program
start-ups (``Num_devices``) only the lines that can still come are looked for: the checkpoint
manager's line after the mesh line, no checkpoint line once MaxText said checkpointing is
disabled, Orbax's timing lines only while no checkpoint-manager record has been seen.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from enum import Enum, auto

from tpu_trainer.metrics.log_badput import MeasuredBadput
from tpu_trainer.metrics.records import absl_time, elapsed


class _Mark(Enum):
    DISTRIBUTED = auto()
    MESH = auto()
    MANAGER = auto()
    RECORD = auto()
    ORBAX = auto()
    DATA_RETRY = auto()


_MESH = ("Num_devices: ", "N")
_NEEDLES: tuple[tuple[str, str, _Mark], ...] = (
    ("distributed system", "AJ", _Mark.DISTRIBUTED),
    ("Checkpoint manager created!", "!", _Mark.MANAGER),
    ("Checkpointing disabled, not creating checkpoint manager", "C", _Mark.MANAGER),
    ("'checkpoint_manager_", "{", _Mark.RECORD),
    ("sync] Finished ", "@", _Mark.ORBAX),
    ("Failed to get next data batch", "b", _Mark.DATA_RETRY),
)
"""Each substring a badput line holds, a few characters of which one is in every line it finds
(only in the start or end line of a distributed span: ``A``ttempting, ``J``ax) and rarely in a
step line: a character is found at memory speed, so a block without it is passed over without
looking for the substring."""
_DISTRIBUTED_START = "Attempting to initialize the jax distributed system"
_DISTRIBUTED_DONE = "Jax distributed system initialized"
_DISABLED = "Checkpointing disabled"
_NUM = r"[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?"
_THREAD = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d\d(?:\.\d+)? +(\d+) [^\s\]]+:\d+\] ")
_EVENT_TYPE = re.compile(r"'event_type': '(\w+)'")
_MANAGER_SECONDS = re.compile(rf"'checkpoint_manager_(blocking_)?duration_secs': ({_NUM})")
_ORBAX_TIMING = re.compile(
    rf"\[(a?sync)\] Finished (blocking )?(save|load)(?: \(blocking \+ background\))? "
    rf"in ({_NUM}) seconds"
)
_RESTORES = frozenset({"restore", "emergency_restore"})


class BadputLines:
    """Reads a MaxText log's badput lines into ``out`` (fed whole lines, in log order)."""

    def __init__(self, out: MeasuredBadput) -> None:
        self.out = out
        self._opened: dict[_Mark, float] = {}
        """When a measured span began (``DISTRIBUTED_START`` or ``MESH``)."""
        self._retry: tuple[float, str] | None = None
        """A data retry waiting for its thread's next line: (its time, the thread)."""
        self._records = MeasuredBadput()
        self._timings = MeasuredBadput()
        self._disabled = False
        """MaxText said this program saves no checkpoints."""
        self._recorded = False
        """A checkpoint-manager record was seen."""

    def passing(self, lines: Iterable[str]) -> Iterator[str]:
        """``lines`` unchanged, each read on its way through."""
        for line in lines:
            self.feed(line, len(line))
            yield line

    def feed(self, text: str, stop: int) -> None:
        """The lines of ``text[:stop]`` (whole lines)."""
        if self._retry is not None:
            self._end_retry(text, 0, stop)
        marks = _found(text, stop, *_MESH, _Mark.MESH)
        restart = bool(marks)  # a program starting (again): every kind of line may follow
        for needle, chars, mark in _NEEDLES:
            if restart or self._wanted(mark):
                marks += _found(text, stop, needle, chars, mark)
        for at, mark in sorted(marks, key=lambda m: m[0]):
            start = text.rfind("\n", 0, at) + 1
            end = text.find("\n", at, stop)
            self._line(mark, text, start, stop if end < 0 else end, stop)

    def _wanted(self, mark: _Mark) -> bool:
        """Whether lines of ``mark`` can come now (when no program starts in the text): the
        checkpoint manager's line only after the mesh line; no checkpoint line while MaxText
        said checkpointing is disabled; Orbax's timing lines only while no checkpoint-manager
        record has been seen (the records win)."""
        if mark is _Mark.MANAGER:
            return _Mark.MESH in self._opened
        if mark in (_Mark.RECORD, _Mark.ORBAX) and self._disabled:
            return False
        return mark is not _Mark.ORBAX or not self._recorded

    def _line(self, mark: _Mark, text: str, start: int, end: int, stop: int) -> None:
        line = text[start:end]
        if mark is _Mark.RECORD:
            self._record(line)
        elif mark is _Mark.ORBAX:
            self._timing(line)
        else:
            at = absl_time(line)
            if at is not None:
                self._timed(mark, at, line, text, end, stop)

    def _timed(self, mark: _Mark, at: float, line: str, text: str, end: int, stop: int) -> None:
        if mark is _Mark.DATA_RETRY:
            thread = _THREAD.search(line)
            if thread is not None:
                self._retry = (at, thread[1])
                self._end_retry(text, end, stop)
        elif mark is _Mark.MESH or (mark is _Mark.DISTRIBUTED and _DISTRIBUTED_START in line):
            self._opened[mark] = at
            self._disabled = False
        elif mark is _Mark.MANAGER or _DISTRIBUTED_DONE in line:
            since = self._opened.pop(_Mark.MESH if mark is _Mark.MANAGER else mark, None)
            if since is not None:
                self.out.add("tpu_initialization", elapsed(since, at))
            self._disabled = self._disabled or _DISABLED in line

    def _record(self, line: str) -> None:
        kind, seconds = _EVENT_TYPE.search(line), _MANAGER_SECONDS.search(line)
        if kind is None or seconds is None:
            return
        self._recorded = True
        blocking = seconds[1] is not None
        if kind[1] == "save" and blocking:
            self._records.add("checkpoint_save", float(seconds[2]))
        elif kind[1] in _RESTORES and not blocking:
            self._records.add("checkpoint_restore", float(seconds[2]))
        self._settle()

    def _timing(self, line: str) -> None:
        m = _ORBAX_TIMING.search(line)
        if m is None:
            return
        mode, blocking, op, seconds = m[1], m[2] is not None, m[3], float(m[4])
        if op == "load" and not blocking:
            self._timings.add("checkpoint_restore", seconds)
        elif op == "save" and blocking == (mode == "async"):
            self._timings.add("checkpoint_save", seconds)
        self._settle()

    def _settle(self) -> None:
        """The checkpoint figures: the manager's records, else Orbax's timing lines."""
        for kind in ("checkpoint_save", "checkpoint_restore"):
            recorded = getattr(self._records, kind)
            setattr(
                self.out, kind, recorded if recorded is not None else getattr(self._timings, kind)
            )

    def _end_retry(self, text: str, pos: int, stop: int) -> None:
        """Close the pending data retry at its thread's next line in ``text[pos:stop]``."""
        assert self._retry is not None  # noqa: S101 - only called with one pending
        since, thread = self._retry
        needle = f" {thread} "
        at = text.find(needle, pos, stop)
        while at >= 0:
            start = text.rfind("\n", 0, at) + 1
            end = text.find("\n", at, stop)
            line = text[start : stop if end < 0 else end]
            m = _THREAD.search(line)
            if m is not None and m[1] == thread and start + m.end(1) == at + len(thread) + 1:
                now = absl_time(line)
                if now is not None:
                    self.out.add("data_loading", elapsed(since, now))
                    self._retry = None
                    return
            at = text.find(needle, at + len(needle), stop)


def _found(text: str, stop: int, needle: str, chars: str, mark: _Mark) -> list[tuple[int, _Mark]]:
    """Where ``needle`` is in ``text[:stop]``, once a line however often it is in it (nowhere,
    at once, when none of ``chars`` is)."""
    found: list[tuple[int, _Mark]] = []
    find = text.find
    if all(find(c, 0, stop) < 0 for c in chars):
        return found
    at = find(needle, 0, stop)
    while at >= 0:
        found.append((at, mark))
        end = find("\n", at, stop)
        at = find(needle, end, stop) if end >= 0 else -1
    return found
