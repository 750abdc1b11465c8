"""Checking xpk command lines with xpk's own argument parser, without running xpk.

xpk lives in its own virtual environment; a small program runs there, builds xpk's parser with
``allow_abbrev=False`` on every sub-parser (xpk's own accepts abbreviations such as ``--num-slice``) and an
``error()`` that reports instead of exiting, and parses each command line. Nothing is executed:
the parsed namespace's ``func`` is never called.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.infra.tool_env import XPK_VERSION, xpk_python

_CHECKER = r"""
import argparse, json, sys
from xpk.parser.core import set_parser

class ParseError(Exception):
    pass

class Parser(argparse.ArgumentParser):
    # Sub-command parsers are made from this class too: none of them may accept abbreviations.
    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message):
        raise ParseError(message)

def check(argv):
    parser = Parser(prog="xpk", allow_abbrev=False)
    set_parser(parser=parser)
    try:
        ns = parser.parse_args(argv)
    except ParseError as e:
        return {"ok": False, "error": str(e)}
    except SystemExit as e:
        return {"ok": False, "error": f"exit {e.code}"}
    return {"ok": True, "args": {k: v for k, v in vars(ns).items()
                                 if isinstance(v, (str, int, float, bool, type(None)))}}

print(json.dumps([check(a) for a in json.load(sys.stdin)]))
"""


class XpkUnavailableError(TpuTrainerError):
    """xpk's virtual environment is not there."""


def check_xpk_argvs(
    argvs: Sequence[Sequence[str]], python: Path | None = None
) -> list[dict[str, object]]:
    """Parse each argv (with or without its leading ``xpk``) with xpk's parser.

    Returns one ``{"ok": bool, "error"|"args": ...}`` per argv.
    """
    python = python or xpk_python()
    if not python.exists():
        raise XpkUnavailableError(
            f"xpk {XPK_VERSION} is not installed at {python.parent.parent}",
            fix="run `bash scripts/test.sh` (it installs xpk), or set TPU_TRAINER_XPK_PYTHON",
        )
    payload = [list(a[1:] if a and a[0] == "xpk" else a) for a in argvs]
    env = {**os.environ, "TELEMETRY_ENABLED": "false"}
    proc = subprocess.run(
        [str(python), "-c", _CHECKER],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise TpuTrainerError(
            f"xpk's parser could not run: {proc.stderr.strip()[-2000:]}",
            fix=f"reinstall xpk {XPK_VERSION} in {python.parent.parent}",
        )
    result: list[dict[str, object]] = json.loads(proc.stdout)
    return result
