"""How xpk 1.16.0 talks: ``[XPK]`` lines on stdout, its exit line, its prompts and the
tracebacks it dies with."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, NoReturn

from tpu_trainer.fakecloud.common import Answer, ToolExit

XPK_VERSION = "1.16.0"
_SITE = "/usr/local/lib/python3.11/site-packages/xpk"

MEMORY_LIMIT_TRACEBACK = f"""\
Traceback (most recent call last):
  File "/usr/local/bin/xpk", line 8, in <module>
    sys.exit(main())
             ^^^^^^
  File "{_SITE}/main.py", line 84, in main
    main_args.func(main_args)
  File "{_SITE}/commands/cluster.py", line 198, in cluster_adapt
    install_kueue_code = _install_kueue(args, system, autoprovisioning_config)
                         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{_SITE}/commands/cluster.py", line 1318, in _install_kueue
    memory_limit=args.memory_limit,
                 ^^^^^^^^^^^^^^^^^
AttributeError: 'Namespace' object has no attribute 'memory_limit'
"""

_EOF_TRACEBACK = f"""\
Traceback (most recent call last):
  File "/usr/local/bin/xpk", line 8, in <module>
    sys.exit(main())
             ^^^^^^
  File "{_SITE}/main.py", line 84, in main
    main_args.func(main_args)
  File "{_SITE}/{{caller}}
  File "{_SITE}/utils/console.py", line 69, in ask_for_user_consent
    user_input = input(prompt) or default_option
                 ^^^^^^^^^^^^^
EOFError: EOF when reading a line
"""


@dataclass
class Xpk:
    """One xpk command's output and its parsed arguments (as xpk's own parser gave them)."""

    answer: Answer
    args: dict[str, Any]

    def arg(self, name: str) -> Any:
        return self.args.get(name)

    def say(self, text: str) -> None:
        self.answer.out(f"[XPK] {text}")

    def task(self, name: str, command: str) -> None:
        self.say(
            f"Task: `{name}` is implemented by the following command not running in "
            f"parallel: `{command}`"
        )

    def fail(self, code: int = 1) -> NoReturn:
        self.say(f"XPK failed, error code {code}")
        raise ToolExit("", code)

    def done(self) -> None:
        self.say("Exiting XPK cleanly")

    def consent(self, question: str, caller: str) -> bool:
        """xpk's ``ask_for_user_consent``: yes under ``--quiet``/``--force``; otherwise it reads
        standard input, and dies with EOFError when there is none (as in any script)."""
        if self.arg("quiet") or self.arg("force"):
            return True
        self.answer.stdout.append(f"[XPK] {question} (y/N): ")
        line = sys.stdin.readline() if not sys.stdin.closed else ""
        if not line:
            self.answer.stdout.append("\n")
            raise ToolExit(_EOF_TRACEBACK.format(caller=caller), 1)
        return line.strip().lower() in ("y", "yes")


def zone_to_region(zone: str) -> str:
    """xpk's zone_to_region: ``us-central1-ai1a`` -> ``us-central1``."""
    terms = zone.split("-")
    if len(terms) not in (2, 3):
        raise ToolExit(
            f'Traceback (most recent call last):\n  File "{_SITE}/core/gcloud_context.py", '
            f"line 95, in zone_to_region\n    raise ValueError(f'Invalid zone name: {{zone}}')\n"
            f"ValueError: Invalid zone name: {zone}\n",
            1,
        )
    return f"{terms[0]}-{terms[1]}"
