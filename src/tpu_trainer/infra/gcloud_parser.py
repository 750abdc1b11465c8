"""Checking gcloud command lines with gcloud's own argument parser, without calling any API.

One process loads gcloud's command tree (from the installed Cloud SDK, as ``gcloud`` itself
does) and executes each command line with a private, empty configuration: no account is
selected, so a line the parser accepts stops at "You do not currently have an active account
selected" before any request is sent; a line it refuses exits 2 with gcloud's own message
(``unrecognized arguments``, ``Invalid choice``, a missing required flag). Nothing reaches a
cloud.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tpu_trainer.errors import TpuTrainerError

_CHECKER = r"""
import json, os, sys, tempfile
sdk = sys.argv[1]
sys.path[:0] = [os.path.join(sdk, "lib"), os.path.join(sdk, "lib", "third_party")]
from googlecloudsdk import gcloud_main
cli = gcloud_main.CreateCLI([])
ACCEPTED = "You do not currently have an active account selected"
out = []
for argv in json.load(sys.stdin):
    with tempfile.TemporaryFile("w+") as err:
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        code = 0
        try:
            cli.Execute(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException as e:
            code, extra = 1, f"{type(e).__name__}: {e}"
            os.write(2, extra.encode())
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        text = err.read().strip()
    ok = code == 0 or (code == 1 and ACCEPTED in text)
    out.append({"ok": ok, "code": code, "error": "" if ok else text[-1500:]})
print(json.dumps(out))
"""


class GcloudSdkMissingError(TpuTrainerError):
    """The Cloud SDK (gcloud) is not installed."""


@dataclass(frozen=True)
class ParsedLine:
    argv: tuple[str, ...]
    ok: bool
    error: str


def sdk_root() -> Path:
    """The installed Cloud SDK: the folder above the ``bin/gcloud`` on PATH."""
    found = shutil.which("gcloud")
    if found is None:
        raise GcloudSdkMissingError(
            "gcloud is not installed",
            fix="install the Google Cloud CLI with its alpha and beta components "
            "(https://cloud.google.com/sdk/docs/install)",
        )
    return Path(found).resolve().parent.parent


def check_gcloud_argvs(argvs: Sequence[Sequence[str]]) -> list[ParsedLine]:
    """Parse each argv (with or without its leading ``gcloud``) with gcloud's own parser."""
    root = sdk_root()
    payload = [list(a[1:] if a and a[0] == "gcloud" else a) for a in argvs]
    with tempfile.TemporaryDirectory(prefix="gcloud-parse-") as config:
        env = {
            **os.environ,
            "CLOUDSDK_CONFIG": config,
            "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
            "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING": "1",
            "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK": "1",
        }
        for key in ("CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", "CLOUDSDK_CORE_ACCOUNT"):
            env.pop(key, None)
        proc = subprocess.run(
            [sys.executable, "-c", _CHECKER, str(root)],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
            check=False,
        )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise TpuTrainerError(
            f"gcloud's parser could not run: {proc.stderr.strip()[-2000:]}",
            fix=f"check the Cloud SDK at {root} (`gcloud version` must work)",
        )
    answers = json.loads(proc.stdout.strip().splitlines()[-1])
    return [
        ParsedLine(tuple(argv), bool(a["ok"]), str(a["error"]))
        for argv, a in zip(payload, answers, strict=True)
    ]
