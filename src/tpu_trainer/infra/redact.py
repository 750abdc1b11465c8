"""Keeping secrets out of everything the tool records or prints."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

SECRET_ENV_VARS = (
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "WANDB_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS_JSON",
    "RAY_AUTH_TOKEN",
)
_PATTERNS = (
    re.compile(r"hf_[A-Za-z0-9]{20,}"),
    re.compile(r"ya29\.[A-Za-z0-9_\-.]{20,}"),
    re.compile(r"(?i)((?:token|api[_-]?key|password|secret)[=:]\s*)([^\s'\"&]+)"),
)
MASK = "***"


class Redactor:
    """Replaces known secret values and secret-looking strings with ``***``."""

    def __init__(self, env: Mapping[str, str] | None = None, extra: Iterable[str] = ()) -> None:
        env = os.environ if env is None else env
        values = [env[name] for name in SECRET_ENV_VARS if env.get(name)]
        self._values = sorted({v for v in [*values, *extra] if len(v) >= 6}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self._values:
            text = text.replace(value, MASK)
        for pattern in _PATTERNS:
            if pattern.groups == 2:
                text = pattern.sub(lambda m: m.group(1) + MASK, text)
            else:
                text = pattern.sub(MASK, text)
        return text

    def argv(self, argv: Iterable[str]) -> list[str]:
        return [self(a) for a in argv]
