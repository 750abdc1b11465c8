"""Build ``catalog/error_classifier.json``: the family classifier's weights for ``diagnose``.

Trains the logistic regression of ``tpu_trainer.plan.diagnose_classify`` on every text of the
corpus of real error texts (``tests/fixtures/diagnose/corpus.yaml``, both splits: the
classifier is measured out of sample by ``bench/diagnose_corpus.py --cross-validate``, whose
every fold trains a model without the texts it scores) and on every message of the services'
formats (``service_formats.yaml``): an error text whole under its family, each line of a
near-miss or a success message that reads as an error under ``none``. The output depends only
on those two files.

Usage:
  python tools/build_diagnose_classifier.py [--out FILE] [--check]
--check writes nothing and exits 1 when the shipped file differs from a fresh build.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tpu_trainer.plan.diagnose_classify import Model
from tpu_trainer.plan.diagnose_score import load_corpus, load_service_formats, train_classifier

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "diagnose"
CORPUS = FIXTURES / "corpus.yaml"
FORMATS = FIXTURES / "service_formats.yaml"
OUT = ROOT / "src" / "tpu_trainer" / "catalog" / "error_classifier.json"


def build(corpus: Path = CORPUS, formats: Path = FORMATS) -> Model:
    """The model from the corpus and the service formats."""
    return train_classifier(load_corpus(corpus) + load_service_formats(formats))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="compare with the shipped file")
    args = parser.parse_args(argv)
    text = build().to_json()
    if args.check:
        same = args.out.exists() and args.out.read_text(encoding="utf-8") == text
        print(f"{args.out}: {'up to date' if same else 'differs from a fresh build'}")
        return 0 if same else 1
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out} ({len(text):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
