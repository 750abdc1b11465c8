"""MaxText's configuration files: from the runtime, or from the wheel alone when it is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpu_trainer.frameworks.maxtext.configs import MaxTextConfigs, MaxTextConfigsError, configs_dir


@pytest.mark.runtime
def test_without_the_runtime_the_wheel_gives_the_files(tmp_path: Path) -> None:
    env = {"TPU_TRAINER_CACHE": str(tmp_path), "HOME": str(tmp_path)}
    with pytest.raises(MaxTextConfigsError, match="not installed") as missing:
        configs_dir(env, fetch=False)
    assert "tpu-trainer runtime install maxtext" in missing.value.fix
    configs = MaxTextConfigs.load(env)
    assert configs.root == tmp_path / "maxtext-configs-0.2.5" / "maxtext" / "configs"
    assert len(configs.keys) == 786
    assert "deepseek3-671b" in configs.model_names()
    assert configs.model("deepseek3-671b")["kv_lora_rank"] == 512
    assert not list(tmp_path.glob("*.download"))  # the wheel itself is not kept
    assert configs_dir(env, fetch=False) == configs.root


@pytest.mark.unit
def test_effective_layers_base_model_and_arguments() -> None:
    configs = MaxTextConfigs.load()
    eff = configs.effective({"model_name": "llama3.1-8b", "base_emb_dim": "64", "steps": "7"})
    assert eff["steps"] == 7
    assert eff["base_emb_dim"] == 4096  # a model key needs override_model_config=true
    eff = configs.effective(
        {"model_name": "llama3.1-8b", "base_emb_dim": "64", "override_model_config": "true"}
    )
    assert eff["base_emb_dim"] == 64
    with pytest.raises(MaxTextConfigsError, match="no model 'llama9'"):
        configs.model("llama9")
