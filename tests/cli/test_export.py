"""Tests for `typedrl export` and typedrl.export."""

import importlib
import importlib.util
import shutil
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from typedrl.checkpoint import load_checkpoint
from typedrl.cli import main
from typedrl.distributed import SingleProcess
from typedrl.envs import make
from typedrl.errors import CheckpointError, ConfigError, MissingDependencyError
from typedrl.export import DeterministicPolicy, ExportFormat, export_checkpoint, export_policy
from typedrl.policies import DifferentiableMLPPolicy, FlatActor, MLPActorCritic
from typedrl.restore import RestoredPolicy, locate_checkpoint, restore_policy

_RUN_NAMES = ["ppo_discrete", "ppo_continuous", "apg", "shac"]


def _policy_of(run_dir: Path) -> tuple[RestoredPolicy, gym.Space[Any]]:
    location = locate_checkpoint(run_dir)
    checkpoint = load_checkpoint(location.path)
    assert checkpoint.env_id is not None
    env = make(checkpoint.env_id, num_envs=1)
    try:
        return restore_policy(checkpoint, env, path=location.path), env.single_observation_space
    finally:
        env.close()


def _observations(space: gym.Space[Any], rows: int = 64) -> torch.Tensor:
    """Random flat observations, wide enough to reach the normalisers' clip."""
    generator = torch.Generator().manual_seed(0)
    width = int(np.prod(space.shape or (1,)))
    return 5.0 * torch.randn(rows, width, generator=generator)


def _expected(policy: RestoredPolicy, obs: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        td = TensorDict({"obs": obs}, batch_size=[obs.shape[0]])
        action: torch.Tensor = policy.act(td, deterministic=True)["action"]
    return action


def _run_onnx(path: Path, obs: torch.Tensor) -> np.ndarray[Any, Any]:
    # onnxruntime ships no type information.
    onnxruntime: Any = importlib.import_module("onnxruntime")
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["obs"]
    assert [o.name for o in session.get_outputs()] == ["action"]
    outputs = session.run(None, {"obs": obs.numpy()})
    result: np.ndarray[Any, Any] = outputs[0]
    return result


def _run_torchscript(path: Path, obs: torch.Tensor) -> torch.Tensor:
    with warnings.catch_warnings():
        # PyTorch deprecates TorchScript; loading still works.
        warnings.simplefilter("ignore", DeprecationWarning)
        module = torch.jit.load(str(path))  # type: ignore[no-untyped-call]
    with torch.no_grad():
        result: torch.Tensor = module(obs)
    return result


@pytest.mark.parametrize("name", _RUN_NAMES)
def test_onnx_matches_the_checkpoint_policy(
    trained_runs: dict[str, Path], name: str, tmp_path: Path
) -> None:
    """The ONNX file alone, copied elsewhere, matches the checkpoint's policy (onnxruntime)."""
    policy, space = _policy_of(trained_runs[name])
    (tmp_path / "export").mkdir()
    result = export_checkpoint(trained_runs[name], output=tmp_path / "export" / "policy.onnx")
    assert sorted(item.name for item in result.path.parent.iterdir()) == ["policy.onnx"]
    copied = tmp_path / "copied" / "policy.onnx"
    copied.parent.mkdir()
    shutil.copy(result.path, copied)
    for rows in (1, 64):
        obs = _observations(space, rows)
        expected = _expected(policy, obs)
        actions = _run_onnx(copied, obs)
        assert actions.shape == tuple(expected.shape)
        if name == "ppo_discrete":
            assert actions.dtype == np.int64
            np.testing.assert_array_equal(actions, expected.numpy())
        else:
            np.testing.assert_allclose(actions, expected.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", _RUN_NAMES)
def test_torchscript_matches_the_checkpoint_policy(
    trained_runs: dict[str, Path], name: str, tmp_path: Path
) -> None:
    """The TorchScript file's actions match the checkpoint's deterministic policy."""
    policy, space = _policy_of(trained_runs[name])
    path = tmp_path / "policy.pt"
    result = export_checkpoint(trained_runs[name], output=path, export_format="torchscript")
    assert result.path == path
    for rows in (3, 64):
        obs = _observations(space, rows)
        expected = _expected(policy, obs)
        actions = _run_torchscript(path, obs)
        assert actions.dtype == expected.dtype
        torch.testing.assert_close(actions, expected, rtol=1e-6, atol=1e-6)


def test_the_normalisers_are_baked_in(trained_runs: dict[str, Path]) -> None:
    """The exported module carries the run's observation statistics (not identity ones)."""
    for name in ("ppo_continuous", "apg"):
        policy, space = _policy_of(trained_runs[name])
        actor = DeterministicPolicy(policy, space).actor
        assert isinstance(actor, FlatActor)
        assert actor.normalizes
        assert actor.obs_mean.abs().sum() > 0
        assert not torch.equal(actor.obs_scale, torch.ones_like(actor.obs_scale))


def test_export_command(trained_runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """`typedrl export RUN_DIR` writes RUN_DIR/policy.onnx and says what it takes and returns."""
    run_dir = trained_runs["ppo_continuous"]
    assert main(["export", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert f"checkpoint  {run_dir / 'checkpoints' / 'best.ckpt'}" in out
    assert "input       obs float32 [batch, 3]" in out
    assert "output      action [batch, 1]" in out
    assert f"wrote       {run_dir / 'policy.onnx'} (onnx)" in out
    last = trained_runs["ppo_discrete"] / "checkpoints" / "last.ckpt"
    assert main(["export", str(last), "--format", "torchscript"]) == 0
    out = capsys.readouterr().out
    assert "output      action int64 [batch] (action index)" in out
    assert last.with_suffix(".pt").is_file()


def test_discrete_actions_keep_the_space_start() -> None:
    """A Discrete(n, start=s) policy exports indices offset by s."""
    space = gym.spaces.Box(-1.0, 1.0, (3,))
    torch.manual_seed(0)
    policy = MLPActorCritic(space, gym.spaces.Discrete(4, start=2), actor_hidden=(8,))
    with torch.no_grad():
        for parameter in policy.actor.parameters():
            parameter.normal_()
    model = DeterministicPolicy(policy, space)
    obs = torch.randn(32, 3)
    actions = model(obs)
    assert torch.equal(actions, _expected(policy, obs))
    assert int(actions.min()) >= 2


def test_features_outside_the_normalise_mask_pass_through() -> None:
    """APG features whose mask entry is False stay unnormalised in the exported module."""
    space = gym.spaces.Box(-10.0, 10.0, (3,))
    mask = torch.tensor([True, False, True])
    policy = DifferentiableMLPPolicy(
        space,
        gym.spaces.Box(-2.0, 2.0, (2,)),
        hidden=(8,),
        normalize_observations=True,
        observation_normalize_mask=mask,
    )
    batch = TensorDict({"obs": 3.0 + 2.0 * torch.randn(256, 3)}, batch_size=[256])
    policy.update_normalizers(batch, dist=SingleProcess())
    model = DeterministicPolicy(policy, space)
    assert isinstance(model.actor, FlatActor)
    assert model.actor.partial_mask
    obs = 4.0 * torch.randn(16, 3)
    torch.testing.assert_close(model(obs), _expected(policy, obs))


def test_unsquashed_policy_exports_its_mean() -> None:
    """A policy with squash=False exports the unbounded Gaussian mean."""
    space = gym.spaces.Box(-1.0, 1.0, (2,))
    policy = DifferentiableMLPPolicy(space, gym.spaces.Box(-1.0, 1.0, (3,)), squash=False)
    model = DeterministicPolicy(policy, space)
    obs = torch.randn(8, 2)
    torch.testing.assert_close(model(obs), _expected(policy, obs))


def test_export_errors(
    trained_runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Missing checkpoints and unknown formats on the command line are clear errors."""
    with pytest.raises(CheckpointError, match="does not exist"):
        export_checkpoint(tmp_path / "missing.ckpt")
    assert main(["export", str(tmp_path / "missing")]) == 1
    assert "typedrl: CheckpointError:" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["export", str(trained_runs["apg"]), "--format", "tflite"])


def test_export_refuses_a_folder_that_does_not_exist(
    trained_runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """-o into a missing folder is one line naming it; nothing is created."""
    target = tmp_path / "no" / "such" / "policy.onnx"
    assert main(["export", str(trained_runs["apg"]), "-o", str(target)]) == 1
    line = capsys.readouterr().err.splitlines()[0]
    assert line == (
        f"typedrl: ConfigError: cannot write {target}: the folder {target.parent} does not "
        f"exist; create it first (mkdir -p {target.parent}) or name a file in an existing folder"
    )
    assert not (tmp_path / "no").exists()


def test_a_checkpoint_used_on_another_env_names_both_envs_spaces(
    trained_runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another env's spaces give one line naming the trained env, not a size-mismatch dump."""
    run_dir = trained_runs["ppo_discrete"]
    assert main(["export", str(run_dir), "--env", "Acrobot-v1", "-o", str(tmp_path / "x")]) == 1
    first, *rest = capsys.readouterr().err.splitlines()
    assert rest == ["(run with --debug for the traceback)"]
    assert first == (
        f"typedrl: ConfigError: checkpoint {run_dir / 'checkpoints' / 'best.ckpt'} was trained "
        "on CartPole-v1 with observation space Box(4,) float32 and action space Discrete(2); "
        "the env it was given has observation space Box(6,) float32 and action space "
        "Discrete(3) ('actor.0.weight' saved [64, 4], needed [64, 6]); use it with "
        "CartPole-v1, the env it records (leave the env argument out)"
    )


def test_export_needs_an_env_when_the_checkpoint_has_none(tmp_path: Path) -> None:
    """A checkpoint without an env id asks for --env; with it, it exports."""
    from typedrl.ppo import PPOAgent, PPOConfig
    from typedrl.training import RunOptions

    config = PPOConfig(total_timesteps=32, num_steps=8, batch_size=16, num_mini_epochs=1)
    env = make("CartPole-v1", num_envs=2, seed=0)
    PPOAgent(env=env, config=config, options=RunOptions(run_dir=tmp_path, progress=False)).fit()
    env.close()
    last = tmp_path / "checkpoints" / "last.ckpt"
    with pytest.raises(ConfigError, match="does not record the env"):
        export_checkpoint(last)
    result = export_checkpoint(last, env_id="CartPole-v1", export_format="torchscript")
    assert result.path == last.with_suffix(".pt")


def test_onnx_export_without_onnx_names_the_extra(
    trained_runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without onnxscript, ONNX export raises MissingDependencyError naming the extra."""
    find_spec = importlib.util.find_spec

    def without_onnxscript(name: str, package: str | None = None) -> Any:
        return None if name == "onnxscript" else find_spec(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", without_onnxscript)
    with pytest.raises(MissingDependencyError, match=r"onnxscript.*typedrl\[onnx\]"):
        export_checkpoint(trained_runs["apg"], output=tmp_path / "p.onnx")


@pytest.mark.parametrize("export_format", ["onnx", "torchscript"])
def test_dict_observations_export_as_the_policy_keys_concatenated(
    export_format: ExportFormat, tmp_path: Path
) -> None:
    """A Dict observation: the file takes the actor's keys, flattened, in the policy's order.

    The critic's own key is not an input; the normalisers of both actor keys are baked in.
    """
    space = gym.spaces.Dict(
        {
            "critic": gym.spaces.Box(-1.0, 1.0, (5,)),
            "velocity": gym.spaces.Box(-1.0, 1.0, (2, 2)),
            "position": gym.spaces.Box(-1.0, 1.0, (3,)),
        }
    )
    torch.manual_seed(0)
    policy = MLPActorCritic(
        space,
        gym.spaces.Box(-1.0, 1.0, (2,)),
        actor_hidden=(16,),
        actor_keys=("velocity", "position"),
        normalize_observations=True,
    )
    generator = torch.Generator().manual_seed(1)

    def batch(rows: int, scale: float) -> TensorDict:
        return TensorDict(
            {
                "critic": torch.randn(rows, 5, generator=generator),
                "velocity": scale * torch.randn(rows, 2, 2, generator=generator) - 2.0,
                "position": scale * torch.randn(rows, 3, generator=generator) + 3.0,
            },
            batch_size=[rows],
        )

    policy.update_normalizers(batch(512, 2.0), dist=SingleProcess())
    model = DeterministicPolicy(policy, space)
    assert model.obs_dim == 4 + 3
    target = export_policy(model, tmp_path / f"policy.{export_format}", export_format=export_format)
    obs = batch(32, 6.0)
    with torch.no_grad():
        expected = policy.act(obs, deterministic=True)["action"]
    flat = torch.cat((obs["velocity"].reshape(32, 4), obs["position"]), dim=-1)
    torch.testing.assert_close(model(flat), expected)
    if export_format == "onnx":
        np.testing.assert_allclose(_run_onnx(target, flat), expected.numpy(), rtol=1e-5, atol=1e-5)
    else:
        torch.testing.assert_close(_run_torchscript(target, flat), expected, rtol=1e-5, atol=1e-5)
