"""The ``gcloud`` of a rehearsal: the real gcloud for API calls, the fake for the rest.

With ``$TPU_TRAINER_REAL_GCLOUD`` set (a rehearsal whose APIs are emulated), every command line
is recorded in the state file's ``calls``, then: ``auth``/``config`` questions are answered
from the scenario's account (but for the token question of gke-gcloud-auth-plugin, ``config
config-helper``, which the real gcloud answers unrecorded), ``compute tpus tpu-vm ssh``/``scp`` (no API calls) go to the
local worker stand-in, and everything else execs the real gcloud. Without it, the fake
answers everything.
"""

from __future__ import annotations

import os

from tpu_trainer.fakecloud.state import state_path, transaction

REAL_GCLOUD_ENV = "TPU_TRAINER_REAL_GCLOUD"
_TRACKS = ("alpha", "beta")


def command_words(argv: list[str]) -> list[str]:
    """The command path of a gcloud line (flags and the release track left out)."""
    words = [a for a in argv if not a.startswith("-")]
    return words[1:] if words and words[0] in _TRACKS else words


def answered_by_fake(argv: list[str]) -> bool:
    words = command_words(argv)
    local = words[:3] == ["compute", "tpus", "tpu-vm"] and words[3:4] in (["ssh"], ["scp"])
    return words[:1] in (["auth"], ["config"]) or local


def token_question(argv: list[str]) -> bool:
    """``config config-helper``: gke-gcloud-auth-plugin asking for the account's token (only
    the real gcloud has it, from the rehearsal's token file; no API call, nothing recorded)."""
    return command_words(argv)[:2] == ["config", "config-helper"]


def main(argv: list[str]) -> int:
    """Record ``gcloud ARGV``, then exec the real gcloud or answer with the fake."""
    real = os.environ.get(REAL_GCLOUD_ENV)
    if real and token_question(argv):
        os.execv(real, [real, *argv])  # noqa: S606 (the installed gcloud, argv as given)
    if real and not answered_by_fake(argv):
        with transaction(state_path(), ["gcloud", *argv]):
            pass
        os.execv(real, [real, *argv])  # noqa: S606 (the installed gcloud, argv as given)
    from tpu_trainer.fakecloud.gcloud import main as fake

    return fake(argv)
