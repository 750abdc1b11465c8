"""The messages inside a log line's wrapper: the logical lines ``diagnose`` reads from one line.

Other programs hand on the failures the catalog knows inside wrappers of their own: a JSON log
(klog, zap, controller-runtime, Cloud Logging's ``jsonPayload``/``textPayload``) or an API's JSON
error body holds the message as an escaped string (``\\"``, ``\\n``); a Python ``repr`` of an
exception (Ray's task errors, a failed future) holds a whole traceback on one line; and Ray
(``(RayTrainWorker pid=12, ip=10.0.0.3)``), SkyPilot (``E 07-18 12:00:00 provisioner.py:171]``),
CI runners (GitHub Actions' ``2024-05-01T10:00:00.1234567Z`` and ``##[error]``, Cloud Build's
``Step #1 - "train":``), Terraform (``│``) and syslog put prefixes of their own before it.

:func:`unwrap` turns one line into the lines it holds: a JSON object's message fields (keys
``msg``, ``message``, ``error``, ``reason``, ``textPayload``, at any depth) after the line as
logged (signatures may read its keys); other escaped text unescaped and split where it held
line breaks; each piece without the wrappers' leading prefixes (a SkyPilot prefix logged at INFO
or DEBUG becomes ``INFO``, so the classifier's gate still knows the level). :func:`wrapped` tells
the lines that need it (a backslash, a JSON object, a character that can start a prefix) from
the rest, nearly every line of a training log, which are read as they are. Every piece keeps
the line's number in the scan.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

__all__ = ["unwrap", "wrapped"]

_ESCAPED = ('\\"', "\\n", "\\'", "\\t", "\\u")
"""Signs that a line holds escaped text (a JSON string or a Python repr)."""
_MESSAGE_KEYS = frozenset(
    ("msg", "message", "error", "err", "reason", "cause", "detail", "details", "textPayload")
)
"""The keys of a JSON log or error body whose values are the message (klog, zap, logrus in
JSON, controller-runtime, Cloud Logging entries, Google API error bodies)."""
_YAML_APOSTROPHE = re.compile(r"(?<=\w)''(?=\w)")
"""An apostrophe inside a word doubled, as YAML writes it in a single-quoted string (kubectl's
``-o yaml``: ``message: 'couldn''t assign flavors ...'``)."""
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|(.))")
_SIMPLE = {"n": "\n", "t": " ", "r": "", "b": "", "f": ""}
_MONTH = "(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_PREFIX = re.compile(
    rf"""[ \t]*(?:
      \((?:[\w.:-]+(?:,\s*|\s+))?pid=\d+(?:,\s*\w+=[\w.:-]+)*\)   # Ray: (pid=1), (Actor pid=1, ip=...)
    | \((?:raylet|gcs_server|autoscaler|monitor|dashboard\w*)(?:,\s*ip=[\w.:-]+)?\)
    | \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z(?=\s)              # a CI runner's UTC stamp
    | \#\#\[(?:error|warning|notice|debug|command)\]
    | Step\ \#\d+(?:\ -\ "[^"]*")?:                                   # Cloud Build
    | │                                                               # Terraform's box
    | {_MONTH}\ [ \d]\d\ \d\d:\d\d:\d\d\ \S+\ [\w./-]+(?:\[\d+\])?:   # syslog, journald
    | (?P<level>[DIWEF])\ \d\d-\d\d\ \d\d:\d\d:\d\d(?:\.\d+)?\ [\w.-]+:\d+\]  # SkyPilot
    )[ \t]?""",
    re.VERBOSE,
)
_FIRST = frozenset("(0123456789#S│JFMASOND \t")
"""The characters a wrapper prefix can start with (a cheap test before the expression), besides
SkyPilot's level letter followed by a space (a glog line, ``I1124 ...``, is not wrapped)."""


def wrapped(line: str) -> bool:
    """False for a line :func:`unwrap` returns unchanged for certain: no backslash, no JSON
    object, and no wrapper prefix can start it (a cheap test for the many lines of a log: one
    character is looked for, not two, as a search for two characters costs five times more)."""
    if line and (line[0] in _FIRST or line[1:2] == " "):
        return True
    return "\\" in line or "{" in line


def unwrap(line: str) -> tuple[str, ...]:
    """The logical lines ``line`` holds, each without its wrappers' prefixes: a line ending in
    a JSON object (a JSON log, an error body) as logged, then the text before the object and
    its message fields, split at their line breaks; another line holding escaped text (a
    Python repr, a JSON string in a wrapper) unescaped and split at the line breaks it held;
    any other line as it is. Blank pieces are dropped; at least one line is returned."""
    line = _strip(line)
    if "''" in line:
        line = _YAML_APOSTROPHE.sub("'", line)
    fields = _json_fields(line) if '{"' in line else None
    if fields is not None:
        return (line, *_pieces("\n".join(fields)))
    if "\\" in line and any(sign in line for sign in _ESCAPED):
        return _pieces(_unescape(line)) or (line,)
    return (line,)


def _pieces(text: str) -> tuple[str, ...]:
    """The non-blank lines of ``text``, each without its wrappers' prefixes."""
    return tuple(_strip(p) for p in text.split("\n") if p.strip())


def _json_fields(line: str) -> list[str] | None:
    """The text before a JSON object that ends ``line`` and the object's message fields (at
    any depth: Cloud Logging's ``jsonPayload.message``), or None when ``line`` does not end in
    a JSON object."""
    start = line.find('{"')
    if not line.rstrip().endswith("}"):
        return None
    try:
        value = json.loads(line[start:])
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    head = line[:start].strip()
    return ([head] if head else []) + list(_messages(value))


def _messages(value: object) -> Iterator[str]:
    """The string values of ``value``'s message keys, depth first."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str):
                if key in _MESSAGE_KEYS and item.strip():
                    yield item
            else:
                yield from _messages(item)
    elif isinstance(value, list):
        for item in value:
            yield from _messages(item)


def _strip(text: str) -> str:
    """``text`` without the wrappers' prefixes at its start (several may be stacked)."""
    for _ in range(4):
        if not text or (text[0] not in _FIRST and text[1:2] != " "):
            return text
        m = _PREFIX.match(text)
        if m is None or m.end() == 0:
            return text
        level = m.group("level")
        text = ("INFO " if level in ("I", "D") else "") + text[m.end() :]
    return text


def _unescape(text: str) -> str:
    """``text`` with JSON and Python string escapes resolved; twice when the text was escaped
    twice (an error body inside another program's JSON message)."""
    for _ in range(2):
        text = _ESCAPE.sub(_one, text)
        if '\\"' not in text:
            break
    return text


def _one(m: re.Match[str]) -> str:
    if m.group(1):
        return chr(int(m.group(1), 16))
    char = m.group(2)
    return _SIMPLE.get(char, char)
