"""Tests for the typedrl command's entry point."""

import importlib.machinery
import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from typedrl.cli import _main, _train, main


def test_info_prints_versions(capsys: pytest.CaptureFixture[str]) -> None:
    """`typedrl info` prints one line per package and exits 0."""
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "torch" in out
    assert "gymnasium" in out
    assert "cuda" in out


def test_info_knows_a_cpu_build_without_importing_torch(tmp_path: Path) -> None:
    """On a CPU build, `typedrl info` reads torch's build from its version file, not torch."""
    script = (
        "import sys\n"
        "from typedrl.cli import main\n"
        "status = main(['info'])\n"
        "print('torch imported:', 'torch' in sys.modules)\n"
        "sys.exit(status)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    built_for_cuda = torch.version.cuda is not None or torch.version.hip is not None
    if built_for_cuda:
        assert "torch imported: True" in done.stdout
    else:
        assert "cuda             0 device(s) (a CPU build of torch)" in done.stdout
        assert "torch imported: False" in done.stdout


@pytest.mark.parametrize(
    ("text", "cpu"),
    [
        ("cuda: Optional[str] = None\nhip: Optional[str] = None\n", True),
        ("cuda = None\nhip = None\n", True),
        ("cuda: Optional[str] = '12.8'\nhip: Optional[str] = None\n", False),
        ("cuda = None\nhip = '6.4'\n", False),
        ("cuda = None\n", False),
        ("this is not python(", False),
    ],
)
def test_the_cpu_build_check_reads_both_assignments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, cpu: bool
) -> None:
    """Only a file saying neither CUDA nor ROCm counts as a CPU build; anything else asks torch."""
    package = tmp_path / "torch"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "version.py").write_text(text)
    origin = str(package / "__init__.py")
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name: importlib.machinery.ModuleSpec(name, None, origin=origin),
    )
    assert _main._torch_is_cpu_build() is cpu


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    """`typedrl --version` prints the version and exits 0."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("typedrl ")


def test_missing_command_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Running without a subcommand exits 2 with a usage message."""
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2
    assert "usage: typedrl" in capsys.readouterr().err


def test_check_env_passes_on_a_conforming_env(capsys: pytest.CaptureFixture[str]) -> None:
    """`typedrl check-env CartPole-v1` reports no violations and exits 0."""
    status = main(["check-env", "CartPole-v1", "--num-envs", "2", "--examples", "2"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "no violations" in out


class _NaNRewardEnv(gym.Env[np.ndarray, np.int64]):
    """A single env whose rewards are NaN: the checker must flag it."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        return np.zeros(2, np.float32), float("nan"), False, False, {}


def _make_nan_reward_env(**_: Any) -> gym.Env[Any, Any]:
    return _NaNRewardEnv()


# Gymnasium's passive env checker warns about the NaN reward before typedrl sees it.
@pytest.mark.filterwarnings("ignore:.*The reward is a NaN value:UserWarning")
def test_check_env_fails_on_a_broken_env(capsys: pytest.CaptureFixture[str]) -> None:
    """A registered env with NaN rewards makes `typedrl check-env` exit 1 naming the rule."""
    env_id = "typedrl-tests/NaNReward-v0"
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=_make_nan_reward_env)
    status = main(["check-env", env_id, "--num-envs", "2", "--examples", "1"])
    out = capsys.readouterr().out
    assert status == 1
    assert "step.finite" in out


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    """The message of a one-line error (no traceback), checked to be just that."""
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert lines[1] == "(run with --debug for the traceback)"
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "NoSuchEnv-v9"],
        ["train", "CartPole-v2"],
        ["check-env", "CartPole-V1"],
    ],
)
def test_misspelt_gymnasium_ids_are_one_line(
    argv: list[str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A misspelt Gymnasium id prints one line with Gymnasium's hint, before a run folder."""
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 1
    line = _one_line_error(capsys)
    assert line.startswith(f"typedrl: ConfigError: unknown env id '{argv[1]}': Environment")
    assert not (tmp_path / "runs").exists()


def test_accelerator_cuda_without_a_gpu_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--accelerator cuda` on a machine torch sees no GPU on prints one line and the fix."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["train", "CartPole-v1", "--accelerator", "cuda"]) == 1
    line = _one_line_error(capsys)
    assert "expected 1 CUDA device(s), torch sees 0" in line
    assert "use --accelerator cpu" in line


def test_ctrl_c_during_start_up_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C before the trainer handles signals prints one line and exits 130."""

    def interrupted(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(_train, "resolve", interrupted)
    assert main(["train", "CartPole-v1"]) == 130
    err = capsys.readouterr().err
    assert err == "typedrl train: interrupted (Ctrl-C)\n"
    with pytest.raises(KeyboardInterrupt):
        main(["--debug", "train", "CartPole-v1"])
