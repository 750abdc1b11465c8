"""A whole MaxText log read at line rate: big blocks, step lines found by substring search.

:func:`scan_log` gives the same events as :func:`~tpu_trainer.frameworks.maxtext.log.iter_events`
into a :class:`~tpu_trainer.metrics.stream.LogTally`, faster on long logs: the start-up lines
go through ``iter_events`` itself; after the first step the text is read in blocks of
``BLOCK`` characters, lines without ``completed `` are never made into strings, and a step
line in MaxText's usual shape (the absl prefix or none, then exactly ``completed step``,
``seconds``, ``TFLOP/s/device``, ``Tokens/s/device``, ``total_weights`` and ``loss``) is read by
one regular expression straight into the step columns. Any other line holding ``completed ``
(Ray prefixes, colours, rampup, extra fields, ``diag:``, hidden profiler steps) goes through
``parse_completed`` as before.

A block whose every ``completed `` is on such a line (the usual case: no Ray prefixes, colours,
rampup or step 0 in it) is read whole: one ``findall`` over the block, then each column's
numbers converted in bulk (``map(float, ...)``) and appended to the step columns at once
(:meth:`~tpu_trainer.metrics.columns.StepColumns.extend_plain`). Any other block goes line by
line as above; both give the same columns.
"""

from __future__ import annotations

import re
from array import array
from itertools import chain
from typing import TextIO

from tpu_trainer.frameworks.maxtext.badput_lines import BadputLines
from tpu_trainer.frameworks.maxtext.log import RAMPUP, iter_events, parse_completed
from tpu_trainer.metrics.records import StartupFact, absl_time
from tpu_trainer.metrics.stream import LogTally

BLOCK = 1 << 20
"""Characters read at a time after the first step (1 Mi: the few passes over a block find it
in the processor's cache; 10-15 % faster than 4 Mi on a 226 MB log)."""

_NUM = r"([-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf))"
_PLAIN = re.compile(
    r"(?:[IWEF]\d{4} \d\d:\d\d:\d\d(?:\.\d+)? +\d+ [\w./-]+:\d+\] )?"
    rf"completed step: (\d+), seconds: {_NUM}, TFLOP/s/device: {_NUM}, "
    rf"Tokens/s/device: {_NUM}, total_weights: {_NUM}, loss: {_NUM}[ \t]*\Z"
)
_WORD = "completed "
_BLOCK_LINE = re.compile(
    rf"completed (?:step: (\d+), seconds: {_NUM}, TFLOP/s/device: ([^,\n]*), "
    r"Tokens/s/device: ([^,\n]*), total_weights: ([^,\n]*), loss: ([^,\n]*)\n)?"
)
"""Every ``completed ``: on a step line in the usual shape (up to its newline) with its six
fields, what the line reader gives for such a line being the seconds' leading number and
``float`` of each other field; anywhere else with six empty fields, which no number reads."""
_FIELDS = 6
_SLOW_MARKS = ("\x1b", RAMPUP)
"""Text that makes the line reader see more than a usual step line's numbers: colours, and
the rampup mark before ``completed``. (Ray's ``[repeated Nx across cluster]`` after the loss
makes the loss field no number.)"""


def scan_log(stream: TextIO, tally: LogTally) -> None:
    """Every event of ``stream`` into ``tally`` (lines counted into ``tally.lines``), and the
    seconds its badput lines measured into ``tally.badput``."""
    badput = BadputLines(tally.badput)
    for event in iter_events(badput.passing(tally.counted(stream))):
        tally.add(event)
        if not isinstance(event, StartupFact):
            break
    else:
        return
    rest = ""
    while block := stream.read(BLOCK):
        text = rest + block
        cut = text.rfind("\n") + 1
        if not _scan_whole(text, cut, tally):
            _scan(text, cut, tally)
        badput.feed(text, cut)
        tally.lines += text.count("\n", 0, cut)
        rest = text[cut:]
    if rest:
        _scan(rest, len(rest), tally)
        badput.feed(rest, len(rest))
        tally.lines += 1


def _scan_whole(text: str, stop: int, tally: LogTally) -> bool:
    """The step lines of ``text[:stop]`` into ``tally`` in bulk, when every ``completed `` in
    it is on a usual step line (and none is step 0, whose line time the columns keep);
    False, having added nothing, otherwise."""
    found = _BLOCK_LINE.findall(text, 0, stop)
    if not found:
        return True
    if any(text.find(mark, 0, stop) >= 0 for mark in _SLOW_MARKS):
        return False
    fields = list(chain.from_iterable(found))  # a column is every sixth field
    try:
        steps = array("q", map(int, fields[0::_FIELDS]))
        figures = [array("d", map(float, fields[k::_FIELDS])) for k in range(1, _FIELDS)]
    except ValueError:  # a field that is not a number: the line reader leaves it out
        return False
    if 0 in steps:
        return False
    tally.columns.extend_plain(steps, *figures)
    return True


def _scan(text: str, stop: int, tally: LogTally) -> None:
    """The step lines among ``text[:stop]`` (whole lines) into ``tally``."""
    find, rfind, match = text.find, text.rfind, _PLAIN.match
    add = tally.columns.add_fields
    at = find(_WORD, 0, stop)
    while at >= 0:
        start = rfind("\n", 0, at) + 1
        end = find("\n", at, stop)
        end = stop if end < 0 else end
        m = match(text, start, end)
        if m is not None:
            step = int(m[1])
            stamp = absl_time(text[start:at]) if step == 0 else None
            add(step, float(m[2]), float(m[3]), float(m[4]), float(m[5]), float(m[6]), stamp)
        else:
            event = parse_completed(text[start : end + 1])
            if event is not None:
                tally.add(event)
        at = find(_WORD, end, stop)
