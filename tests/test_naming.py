"""Tests for ``tpu_trainer.plan.naming``: workload names xpk always accepts.

hypothesis is not installed in the project's virtual environment, so the property tests run
over a list of hand-picked nasty inputs plus a fixed-seed random sample.
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from datetime import datetime

import pytest

from tpu_trainer.plan.naming import (
    PREFIX_MAX,
    WORKLOAD_NAME_MAX,
    is_valid_workload_name,
    slug,
    submit_script_name,
    workload_name,
    workload_prefix,
)

pytestmark = pytest.mark.unit

NAME_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
WHEN = datetime(2026, 11, 22, 6, 0)
LATEST = datetime(2099, 12, 31, 23, 59)

NASTY: list[tuple[str, str]] = [
    ("user", "deepseekv3-671b-4096-fsdp"),
    ("User", "Llama3.1-405B"),
    ("USER_NAME", "MIXTRAL_8X7B"),
    ("first.last", "qwen3.235b.a22b"),
    ("123", "model"),
    ("9lives", "7b"),
    ("", "llama3-8b"),
    ("", ""),
    ("user", ""),
    ("-", "-"),
    ("___", "..."),
    ("a" * 100, "b" * 100),
    ("x", "y" * 60),
    ("user", "-" * 40),
    ("Ünïcödé", "模型"),
    ("user", "model--with---hyphens"),
    ("user.", ".model"),
    ("user", "model_"),
    ("user", "7b-"),
    ("root", "../../etc/passwd"),
    ("o'neil", "$(rm -rf ~)"),
    ("tab\tuser", "line\nbreak"),
    # f"{user}-{model}" has '-' as its 26th character
    ("abcd", "efghijklmnopqrstuvwx-yz"),
    ("abcdefghijklmnopqrstuvwxy", "z"),
    ("user", "abcdefghijklmnopqrst-uv"),
    # the leading 'w' shifts a hyphen to the 26th character
    ("1bcd", "efghijklmnopqrstuvw-xyz"),
    ("1", "abcdefghijklmnopqrstuv-x"),
]


def _random_inputs(count: int) -> list[tuple[str, str]]:
    rng = random.Random(20261122)  # noqa: S311 - reproducible test inputs, not secrets
    alphabet = "abcXYZ019-_.-- /~é\t"
    out = []
    for _ in range(count):
        user = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        model = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 50)))
        out.append((user, model))
    return out


def _assert_valid(name: str) -> None:
    assert len(name) <= WORKLOAD_NAME_MAX, name
    assert NAME_RE.match(name), name
    assert "--" not in name, name


@pytest.mark.parametrize(("user", "model"), NASTY)
def test_workload_name_nasty_inputs_are_valid_for_xpk(user: str, model: str) -> None:
    for when in (WHEN, LATEST):
        name = workload_name(user, model, when)
        _assert_valid(name)
        assert is_valid_workload_name(name)
        assert name.endswith(f"-{when:%Y%m%d-%H%M}")


def test_workload_name_random_inputs_are_valid_for_xpk() -> None:
    for user, model in _random_inputs(300):
        _assert_valid(workload_name(user, model, WHEN))
        assert len(workload_prefix(user, model)) <= PREFIX_MAX


@pytest.mark.parametrize(("user", "model"), NASTY)
def test_workload_prefix_nasty_inputs_are_short_and_clean(user: str, model: str) -> None:
    prefix = workload_prefix(user, model)
    assert 1 <= len(prefix) <= PREFIX_MAX == 26
    assert prefix[0].isalpha()
    assert not prefix.endswith("-")
    assert "--" not in prefix
    assert NAME_RE.match(prefix)


def test_workload_name_longest_prefix_fills_exactly_40_characters() -> None:
    name = workload_name("a" * 100, "b", WHEN)
    assert len(name) == WORKLOAD_NAME_MAX
    assert name == "a" * 26 + "-20261122-0600"


def test_workload_prefix_keeps_readable_user_and_model() -> None:
    assert workload_prefix("User", "Llama3.1-405B") == "user-llama3-1-405b"
    assert workload_name("test_user", "llama3-8b", WHEN) == "test-user-llama3-8b-20261122-0600"


def test_workload_prefix_leading_digit_gets_a_letter() -> None:
    assert workload_prefix("123", "model") == "w123-model"


def test_workload_prefix_empty_user_uses_model_alone() -> None:
    assert workload_prefix("", "llama3-8b") == "llama3-8b"


def test_workload_prefix_nothing_usable_falls_back_to_run() -> None:
    assert workload_prefix("", "") == "run"
    assert workload_prefix("___", "...") == "run"
    assert workload_name("", "", WHEN) == "run-20261122-0600"


def test_workload_prefix_hyphen_at_26th_character_is_dropped() -> None:
    user, model = "abcd", "efghijklmnopqrstuvwx-yz"
    assert f"{user}-{model}"[25] == "-"
    assert workload_prefix(user, model) == "abcd-efghijklmnopqrstuvwx"


def test_workload_prefix_hyphen_shifted_by_leading_letter_is_dropped() -> None:
    user, model = "1bcd", "efghijklmnopqrstuvw-xyz"
    assert f"w{user}-{model}"[25] == "-"
    assert workload_prefix(user, model) == "w1bcd-efghijklmnopqrstuvw"


def test_nasty_inputs_include_hyphen_at_cut_point() -> None:
    def before_cut(user: str, model: str) -> str:
        text = slug(f"{user}-{model}")
        return "w" + text if text[:1].isdigit() else text

    cut_on_hyphen = [(u, m) for u, m in NASTY if before_cut(u, m)[25:26] == "-"]
    shifted = [(u, m) for u, m in cut_on_hyphen if u[:1].isdigit()]
    assert len(cut_on_hyphen) >= 5
    assert len(shifted) >= 2


# ---------------------------------------------------------------------------
# The seed's trap: printf "%.26s" can cut just after a hyphen
# ---------------------------------------------------------------------------

SEED_TRAP = ("user", "deepseekv3-671b-4096-fsdp")


def _seed_prefix(text: str) -> str:
    """What the seed's ``printf "%.26s"`` gives (the real printf when there is one)."""
    printf = shutil.which("printf")
    if printf is None:
        return text[:26]
    return subprocess.run(
        [printf, "%.26s", text], capture_output=True, text=True, check=True
    ).stdout


def test_seed_printf_prefix_ends_in_hyphen_and_doubles_it() -> None:
    user, model = SEED_TRAP
    seed = _seed_prefix(f"{user}-{model}")
    assert seed == "user-deepseekv3-671b-4096-"
    seed_name = f"{seed}-{WHEN:%Y%m%d-%H%M}"
    assert "--" in seed_name
    assert not is_valid_workload_name(seed_name)


def test_workload_prefix_seed_trap_input_has_no_trailing_or_double_hyphen() -> None:
    user, model = SEED_TRAP
    prefix = workload_prefix(user, model)
    assert prefix == "user-deepseekv3-671b-4096"
    name = workload_name(user, model, WHEN)
    assert name == "user-deepseekv3-671b-4096-20261122-0600"
    assert "--" not in name
    assert is_valid_workload_name(name)


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "a" * 41,
        "Upper-20261122-0600",
        "1abc",
        "abc-",
        "-abc",
        "ab--cd",
        "ab_cd",
        "",
    ],
)
def test_is_valid_workload_name_rejects_bad_names(name: str) -> None:
    assert not is_valid_workload_name(name)


@pytest.mark.parametrize("name", ["a", "a" * 40, "user-model-20261122-0600", "a1-b2"])
def test_is_valid_workload_name_accepts_good_names(name: str) -> None:
    assert is_valid_workload_name(name)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello World", "hello-world"),
        ("a__b..c", "a-b-c"),
        ("--x--", "x"),
        ("é", ""),
    ],
)
def test_slug_collapses_runs_and_strips_ends(text: str, expected: str) -> None:
    assert slug(text) == expected


def test_submit_script_name_replaces_unsafe_characters() -> None:
    assert submit_script_name("llama3-8b") == "submit_llama3-8b.sh"
    assert submit_script_name("a b/c$d") == "submit_a_b_c_d.sh"
