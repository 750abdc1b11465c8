"""tools/build_training_scripts.py: the scripts README recipes run, read from git mirrors (here,
small repositories made for the test) at the revisions the READMEs imply."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tpu_trainer.recipes import script_recipe as script_recipe_module
from tpu_trainer.recipes.script_recipe import script_recipe
from tpu_trainer.recipes.training_scripts import blob_id, parse_training_scripts

pytestmark = pytest.mark.unit

TOOLS = Path(__file__).resolve().parents[1] / "tools"

README = """\
# A model on TPU v5p

```
git clone https://github.com/AI-Hypercomputer/maxtext.git
```

```
export TPU_TYPE=v5p-8
export RUN_NAME=run
export OUTPUT_PATH=gs://b/
xpk workload create --cluster c --workload w --tpu-type=${TPU_TYPE} \\
--command "bash MaxText/configs/v5p/m.sh RUN_NAME=$RUN_NAME OUTPUT_PATH=$OUTPUT_PATH"
```
"""
SCRIPT = """\
#!/bin/bash
# A licence header and a comment the data leaves out.

for ARGUMENT in "$@"; do
    IFS='=' read -r KEY VALUE <<< "$ARGUMENT"
    export "$KEY"="$VALUE"
done
bash preflight.sh
python3 -m MaxText.train MaxText/configs/base.yml run_name=$RUN_NAME out=$OUTPUT_PATH
"""


def _tool() -> ModuleType:
    if str(TOOLS) not in sys.path:
        sys.path.insert(0, str(TOOLS))
    name = "build_training_scripts"
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _git(repo: Path, *args: str, when: str = "2025-01-01T00:00:00Z") -> str:
    env = {
        "GIT_AUTHOR_DATE": when,
        "GIT_COMMITTER_DATE": when,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "PATH": "/usr/bin:/bin",
        "HOME": str(repo),
    }
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _repo(path: Path, files: dict[str, str], when: str) -> Path:
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "first", when=when)
    return path


def test_the_data_holds_the_dated_revision_and_the_last_one_with_the_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    maxtext = _repo(
        tmp_path / "maxtext",
        {
            "MaxText/configs/v5p/m.sh": SCRIPT,
            "MaxText/train.py": "",
            "MaxText/configs/base.yml": "",
            "preflight.sh": "",
        },
        "2025-01-01T00:00:00Z",
    )
    old = _git(maxtext, "rev-parse", "HEAD")
    (maxtext / "src").mkdir()
    _git(maxtext, "mv", "MaxText", "src/MaxText")
    _git(maxtext, "commit", "-q", "-m", "move", when="2025-02-01T00:00:00Z")
    moved = _git(maxtext, "rev-parse", "HEAD")
    diffusion = _repo(tmp_path / "maxdiffusion", {"x": ""}, "2025-01-01T00:00:00Z")
    recipes = _repo(
        tmp_path / "tpu-recipes", {"training/v5p/M/README.md": README}, "2025-03-01T00:00:00Z"
    )
    out = tmp_path / "data.yaml"
    build = _tool()
    argv = ["--tpu-recipes", str(recipes / ".git"), "--maxtext", str(maxtext / ".git")]
    assert build.main([*argv, "--maxdiffusion", str(diffusion / ".git"), "--out", str(out)]) == 0

    data = parse_training_scripts(out.read_text())
    [known] = data.readmes.values()
    assert known.blob == blob_id(README.encode())
    assert (known.path, known.date, known.current["maxtext"]) == (
        "training/v5p/M/README.md",
        "2025-03-01",
        moved,
    )
    dated, kept = data.revisions["maxtext"][moved], data.revisions["maxtext"][old]
    assert dated.files["MaxText/configs/v5p/m.sh"] is False
    gone = dated.gone["MaxText/configs/v5p/m.sh"]
    assert (gone.commit, gone.date) == (moved, "2025-02-01")
    assert gone.to == "src/MaxText/configs/v5p/m.sh"
    assert kept.files["MaxText/train.py"] and kept.files["MaxText/configs/base.yml"]
    script = kept.scripts["MaxText/configs/v5p/m.sh"]
    assert "licence" not in script and script.startswith('for ARGUMENT in "$@"; do')
    assert "preflight.sh" not in kept.scripts  # run by the pod, not followed

    monkeypatch.setattr(script_recipe_module, "training_scripts", lambda: data)
    folder = tmp_path / "checkout" / "M"
    folder.mkdir(parents=True)
    (folder / "README.md").write_text(README)
    recipe = script_recipe(folder / "README.md", README)
    assert recipe.program_args == ("run_name=${WORKLOAD_NAME}", "out=${BASE_OUTPUT_DIR}")
    [problem] = recipe.problems
    assert f"MaxText {moved[:8]} (2025-02-01; current on 2025-03-01" in problem.message
    assert f"planned at {old[:8]} (2025-01-01)" in problem.message
    assert "moved to src/MaxText/configs/v5p/m.sh" in problem.message


def test_commands_only_keeps_continuations_and_drops_comments() -> None:
    build = _tool()
    text = "#!/bin/bash\n# c\n\nA=1   \npython3 x.py \\\n  y=1 \\ \n  # inner\n"
    assert build.commands_only(text) == "A=1\npython3 x.py \\\n  y=1 \\ \n"
