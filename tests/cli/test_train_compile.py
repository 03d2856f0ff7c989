"""`typedrl train --compile`: the flag, the path a run reports, weights whatever the caches hold."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from tests.cli.factories import SMALL_RUN
from typedrl.checkpoint import load_checkpoint
from typedrl.cli import main
from typedrl.errors import ConfigError

_ROOT = Path(__file__).resolve().parents[2]
_RUN = ["CartPole-v1", "--total-timesteps", "32", *SMALL_RUN]
_RUN += ["--set", "actor_hidden=[8]", "--set", "critic_hidden=[8]"]
"""Two epochs of 16 env steps, one minibatch each, on small networks."""

_TRAIN_AND_COUNT = """
import sys
from torch._dynamo.utils import counters
from typedrl.cli import main
status = main(sys.argv[1:])
print("fxgraph cache hits", counters["inductor"]["fxgraph_cache_hit"])
sys.exit(status)
"""
"""`typedrl train` that also prints how many compiled graphs torch took from its cache."""


def _printed_config(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert main(["train", *argv, "--print-config"]) == 0
    config: dict[str, object] = yaml.safe_load(capsys.readouterr().out)["config"]
    return config


def test_compile_is_set_by_the_flag_set_and_yaml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--compile, --set compile=true and a YAML file agree; off by default; --no-compile wins."""
    assert _printed_config(capsys)["compile"] is False
    assert _printed_config(capsys, "--compile")["compile"] is True
    assert _printed_config(capsys, "--set", "compile=true")["compile"] is True
    file = tmp_path / "config.yaml"
    file.write_text("config:\n  compile: true\n")
    assert _printed_config(capsys, "--config", str(file))["compile"] is True
    assert _printed_config(capsys, "--config", str(file), "--no-compile")["compile"] is False
    # An older release's config.yaml (reloaded with --config) spells it compile_update.
    file.write_text("config:\n  compile_update: auto\n")
    printed = _printed_config(capsys, "--config", str(file))
    assert (printed["compile"], "compile_update" in printed) == (False, False)


def test_compile_is_refused_for_the_differentiable_trainers() -> None:
    """APG and SHAC have no compiled update: the flag is one clear error."""
    with pytest.raises(ConfigError, match="--compile is PPO's"):
        main(["--debug", "train", "--algo", "apg", "--compile", "--print-config"])


def test_a_run_of_an_older_release_resumes(tmp_path: Path) -> None:
    """A run folder whose config.yaml and checkpoint hold compile_update resumes and evaluates."""
    run_dir = tmp_path / "run"
    assert main(["train", *_RUN, "--run-dir", str(run_dir)]) == 0
    config_file = run_dir / "config.yaml"
    document = yaml.safe_load(config_file.read_text())
    del document["config"]["compile"]
    document["config"]["compile_update"] = "auto"
    config_file.write_text(yaml.safe_dump(document))
    last = run_dir / "checkpoints" / "last.ckpt"
    checkpoint = torch.load(last, weights_only=True)
    del checkpoint["config"]["compile"]
    checkpoint["config"]["compile_update"] = "auto"
    torch.save(checkpoint, last)
    # Evaluating it rebuilds the policy from the checkpoint's config, compile_update and all.
    assert main(["evaluate", str(last), "--episodes", "2", "--num-envs", "2"]) == 0
    assert main(["train", "--resume", str(run_dir), "--total-timesteps", "48"]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["global_step"], summary["update"]) == (48, "eager")


def _train(run_dir: Path, cache: Path, *flags: str) -> str:
    """`typedrl train` in a fresh process with ``cache`` as torch's compile cache; its output."""
    environment = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    argv = ["train", *_RUN, "--run-dir", str(run_dir), *flags]
    done = subprocess.run(
        [sys.executable, "-c", _TRAIN_AND_COUNT, *argv],
        cwd=_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _tensors(run_dir: Path) -> dict[str, torch.Tensor]:
    """The policy's weights and the optimizer's state in ``last.ckpt``, by name."""
    checkpoint = load_checkpoint(run_dir / "checkpoints" / "last.ckpt")
    tensors = {f"policy.{k}": v for k, v in checkpoint.modules["policy"].items()}
    for index, state in checkpoint.optimizers["policy"]["state"].items():
        tensors.update({f"adam.{index}.{key}": value for key, value in state.items()})
    return tensors


def _assert_identical(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    different = [name for name in a if not torch.equal(a[name], b[name])]
    assert not different, f"not bit-identical: {different}"


@pytest.mark.slow
def test_the_same_command_gives_the_same_weights_whatever_the_cache_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compiled on a cold cache and on a warm one: bit-identical weights; eager alike.

    The second compiled run uses a copy of the cache the first one filled, and takes
    its compiled graphs from it. Each run says which update path ran, on the console
    and in summary.json. The compiled runs take fresh processes (the suite's runtime
    shape checks wrap what torch.compile would trace); the eager ones run here.
    """
    cold, warm = tmp_path / "cold", tmp_path / "warm"
    out = _train(tmp_path / "compiled-cold", cold, "--compile")
    assert "update          torch.compile\n" in out
    assert "fxgraph cache hits 0\n" in out
    shutil.copytree(cold, warm)
    out = _train(tmp_path / "compiled-warm", warm, "--compile")
    assert "fxgraph cache hits 0\n" not in out
    _assert_identical(_tensors(tmp_path / "compiled-cold"), _tensors(tmp_path / "compiled-warm"))
    summary = json.loads((tmp_path / "compiled-warm" / "summary.json").read_text())
    assert summary["update"] == "compiled"
    # Eager runs never read the cache: an empty one and the warm one give the same weights.
    for name, cache in (("eager-empty", tmp_path / "empty"), ("eager-warm", warm)):
        monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
        assert main(["train", *_RUN, "--run-dir", str(tmp_path / name)]) == 0
        assert "update          eager\n" in capsys.readouterr().out
        assert json.loads((tmp_path / name / "summary.json").read_text())["update"] == "eager"
    _assert_identical(_tensors(tmp_path / "eager-empty"), _tensors(tmp_path / "eager-warm"))
