"""Probe: Tunix's own reading of a GRPO configuration file (``grpo_main.GrpoPipeline``).

Runs in the Tunix runtime (Python 3.12, ``google-tunix==0.1.7``), on CPU. It loads the file the
way ``python -m tunix.cli.grpo_main FILE [overrides]`` does, then builds everything
``grpo_main`` builds before it needs TPU devices or downloads: the RL training config (with the
actor optimizer), the GRPO config, the rollout config, each model's mesh and the reward
functions. ``HF_TOKEN`` must be set in the environment (Tunix checks it for a Hugging Face
tokenizer); its value is never read here.

payload (argv[1], JSON): cases loaded one after the other in one process (Tunix is imported
once); ``unset`` names variables removed for that case::

    {"cases": [{"config": "/path/grpo.yaml", "overrides": [], "unset": []},
               {"config": "/path/grpo.yaml", "overrides": ["rl_training_config.max_steps=10"]}]}

answer (last stdout line, JSON)::

    {"results": [{"ok": true, "error": null, "config": {"batch_size": 1, "max_steps": 10, ...}},
                 {"ok": false, "error": "TypeError: ... 'eval_every_n_steps' ...", "config": {}}]}
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from typing import Any

ROLES = ("model_config", "actor_model_config", "reference_model_config", "rollout_model_config")


def load(path: str, overrides: list[str]) -> dict[str, Any]:
    grpo_main: Any = importlib.import_module("tunix.cli.grpo_main")
    grpo_learner: Any = importlib.import_module("tunix.rl.grpo.grpo_learner")

    pipeline = grpo_main.GrpoPipeline(["grpo_main", path, *overrides])
    training = pipeline.create_rl_training_config()
    grpo = grpo_learner.GrpoConfig(**pipeline._config_mapping("grpo_config"))
    rollout = pipeline.create_rollout_config()
    meshes = {role: pipeline.parse_mesh_config(role) for role in ROLES}
    rewards = pipeline.obtain_reward_fn()
    return {
        "batch_size": pipeline.config.get("batch_size"),
        "max_steps": training.max_steps,
        "eval_every_n_steps": training.eval_every_n_steps,
        "num_generations": grpo.num_generations,
        "beta": grpo.beta,
        "max_tokens_to_generate": rollout.max_tokens_to_generate,
        "kv_cache_size": rollout.kv_cache_size,
        "meshes": {role: [list(shape), list(names)] for role, (shape, names) in meshes.items()},
        "reward_functions": [f"{f.__module__}.{f.__name__}" for f in rewards],
        "tokenizer_path": pipeline.config["tokenizer_config"]["tokenizer_path"],
    }


def one(case: dict[str, Any]) -> dict[str, Any]:
    saved = {name: os.environ.pop(name) for name in case.get("unset") or [] if name in os.environ}
    try:
        config = load(case["config"], list(case.get("overrides") or []))
    except Exception as e:  # the answer reports any failure
        last = traceback.format_exception_only(type(e), e)[-1].strip()
        return {"ok": False, "error": last, "config": {}}
    finally:
        os.environ.update(saved)
    return {"ok": True, "error": None, "config": config}


def main() -> None:
    payload = json.loads(sys.argv[1])
    results = [one(case) for case in payload["cases"]]
    sys.stdout.write("\n" + json.dumps({"results": results}) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
