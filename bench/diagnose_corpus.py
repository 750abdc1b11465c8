"""Per-family precision and recall of ``tpu-trainer diagnose`` on the corpus of real error texts.

    .venv/bin/python bench/diagnose_corpus.py [CORPUS] [--misses] [--speed]

CORPUS defaults to tests/fixtures/diagnose/corpus.yaml; any file of the same form (a new batch
of texts, scored before the catalog is changed for it) will do. Prints one table per split (all,
dev, held-out) and, with --misses, every entry ranked in the wrong family; --speed also times
``diagnose`` over MaxText step lines (three runs, after the catalog is loaded). Exits 1 when the
overall rate is below 95 % or a near-miss matched.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tpu_trainer.catalog.error_signatures import catalog
from tpu_trainer.plan.diagnose import diagnose
from tpu_trainer.plan.diagnose_classify import Classifier, best_verdict
from tpu_trainer.plan.diagnose_score import (
    NONE,
    Entry,
    Outcome,
    Score,
    load_corpus,
    load_service_formats,
    score,
    train_classifier,
)

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "diagnose" / "corpus.yaml"
FORMATS = CORPUS.with_name("service_formats.yaml")
TARGET = 0.95
STEP_LINES = 20_000
STEP_LINE = (
    "I1124 00:05:{sec:02d}.101995 140471507549056 metric_logger.py:265] completed step: {step}, "
    "seconds: 0.226, TFLOP/s/device: 0.032, Tokens/s/device: 565.843, total_weights: 128, "
    "loss: 10.937, lm_loss: 10.937, perplexity: 56225.742"
)


def _pct(value: float | None) -> str:
    return "   -" if value is None else f"{value * 100:4.0f}"


def table(title: str, result: Score) -> list[str]:
    rows = [
        f"{title}: {len(result.outcomes)} texts, {result.rate * 100:.1f} % in the right family, "
        f"{len(result.near_misses_matched)} near-miss(es) matched",
        f"  {'family':<26}{'texts':>6}{'ranked':>8}{'prec %':>8}{'recall %':>10}",
    ]
    for fam in result.families():
        rows.append(
            f"  {fam.family:<26}{fam.expected:>6}{fam.predicted:>8}"
            f"{_pct(fam.precision):>8}{_pct(fam.recall):>10}"
        )
    near = sum(o.entry.family == "none" for o in result.outcomes)
    rows.append(f"  {'none (near-misses)':<26}{near:>6}")
    return rows


def speed(runs: int = 3) -> list[float]:
    """Lines per second of ``diagnose`` over MaxText step lines, once per run."""
    catalog()
    lines = [STEP_LINE.format(sec=i % 60, step=i) for i in range(STEP_LINES)]
    rates = []
    for _ in range(runs):
        start = time.perf_counter()
        diagnose(lines)
        rates.append(len(lines) / (time.perf_counter() - start))
    return rates


def fold_of(entry: Entry, folds: int) -> int:
    """The fold of ``entry``: by a hash of its source thread, so every text of one thread (and
    the family's wording it shows) is left out together."""
    return hashlib.sha256(entry.source.encode("utf-8")).digest()[0] % folds


def cross_validate(
    entries: Sequence[Entry], formats: Sequence[Entry], folds: int
) -> tuple[Score, Score]:
    """Grouped k-fold: per fold, a classifier trained on every other fold's texts and the
    service formats scores the fold's texts, with the signatures (the whole ``diagnose``) and
    alone (its most confident verdict over the lines that read as errors)."""
    whole: list[Outcome] = []
    alone: list[Outcome] = []
    for k in range(folds):
        kept = [e for e in entries if fold_of(e, folds) != k]
        classifier = Classifier(train_classifier([*kept, *formats]))
        held = [e for e in entries if fold_of(e, folds) == k]
        whole.extend(score(held, classifier=classifier).outcomes)
        for e in held:
            verdict = best_verdict(classifier, e.text.splitlines())
            alone.append(Outcome(entry=e, predicted=verdict.family if verdict else NONE))
    return Score(outcomes=tuple(whole)), Score(outcomes=tuple(alone))


def errors_rate(result: Score) -> str:
    errors = [o for o in result.outcomes if o.entry.family != NONE]
    near = len(result.outcomes) - len(errors)
    right = sum(o.correct for o in errors)
    return (
        f"errors {right}/{len(errors)} ({right / max(len(errors), 1) * 100:.1f} %), "
        f"near-misses unmatched {near - len(result.near_misses_matched)}/{near}"
    )


def show_cross_validation(entries: Sequence[Entry], folds: int, misses: bool) -> None:
    whole, alone = cross_validate(entries, load_service_formats(FORMATS), folds)
    print(f"cross-validation, {folds} folds grouped by source thread:")
    print("\n".join(table("signatures + classifier", whole)))
    print(f"  {errors_rate(whole)}\n")
    print("\n".join(table("classifier alone", alone)))
    print(f"  {errors_rate(alone)}\n")
    if misses:
        show_misses(alone)


def show_misses(result: Score) -> None:
    for miss in result.misses:
        first = miss.entry.text.strip().splitlines()[0][:110]
        print(f"[{miss.entry.split}] expected {miss.entry.family}, got {miss.predicted}: {first}")
        print(f"    {miss.entry.source}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1] if __doc__ else None)
    parser.add_argument("corpus", nargs="?", type=Path, default=CORPUS)
    parser.add_argument("--misses", action="store_true", help="list the texts ranked wrong")
    parser.add_argument("--speed", action="store_true", help="time a scan of MaxText step lines")
    parser.add_argument(
        "--cross-validate",
        action="store_true",
        help="score the classifier out of fold (grouped by source thread)",
    )
    parser.add_argument("--folds", type=int, default=10, help="folds of --cross-validate")
    args = parser.parse_args(argv)
    entries = load_corpus(args.corpus)
    everything = score(entries)
    for title, result in (
        ("all", everything),
        ("dev", score(entries, "dev")),
        ("held-out", score(entries, "heldout")),
    ):
        print("\n".join(table(title, result)), end="\n\n")
    if args.misses:
        show_misses(everything)
    if args.cross_validate:
        show_cross_validation(entries, args.folds, args.misses)
    if args.speed:
        rates = ", ".join(f"{r / 1000:.1f}" for r in speed())
        print(f"speed: {rates} k lines/s ({STEP_LINES:,} MaxText step lines per run)")
    ok = everything.rate >= TARGET and not everything.near_misses_matched
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
