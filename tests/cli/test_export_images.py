"""Tests for typedrl.export on policies with image encoders (ONNX and TorchScript)."""

import importlib
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from typedrl.distributed import SingleProcess
from typedrl.export import DeterministicPolicy, ExportFormat, export_policy
from typedrl.policies import MLPActorCritic

_SPACE = gym.spaces.Dict(
    {
        "direction": gym.spaces.Discrete(4),
        "image": gym.spaces.Box(0, 255, (7, 7, 3), np.uint8),
        "x": gym.spaces.Box(-1.0, 1.0, (2,)),
    }
)


def _batch(rows: int, seed: int) -> TensorDict:
    generator = torch.Generator().manual_seed(seed)
    return TensorDict(
        {
            "direction": torch.randint(0, 4, (rows,), generator=generator),
            "image": torch.randint(0, 256, (rows, 7, 7, 3), generator=generator).to(torch.uint8),
            "x": 3.0 * torch.randn(rows, 2, generator=generator) + 1.0,
        },
        batch_size=[rows],
    )


def _flat(obs: TensorDict, keys: tuple[str, ...]) -> torch.Tensor:
    rows = obs.batch_size[0]
    return torch.cat([obs[key].reshape(rows, -1).float() for key in keys], dim=-1)


def _run(path: Path, export_format: ExportFormat, flat: torch.Tensor) -> torch.Tensor:
    if export_format == "onnx":
        # onnxruntime ships no type information.
        onnxruntime: Any = importlib.import_module("onnxruntime")
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return torch.from_numpy(session.run(None, {"obs": flat.numpy()})[0])
    with warnings.catch_warnings():
        # PyTorch deprecates TorchScript; loading still works.
        warnings.simplefilter("ignore", DeprecationWarning)
        module = torch.jit.load(str(path))  # type: ignore[no-untyped-call]
    with torch.no_grad():
        result: torch.Tensor = module(flat)
    return result


@pytest.mark.parametrize("export_format", ["onnx", "torchscript"])
@pytest.mark.parametrize("action_space", [gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Discrete(5)])
def test_a_cnn_policy_exports_equal_to_the_policy(
    export_format: ExportFormat, action_space: gym.Space[Any], tmp_path: Path
) -> None:
    """Image scaling, one-hot and normalisers baked in: the file's actions are the policy's."""
    torch.manual_seed(0)
    policy = MLPActorCritic(
        _SPACE, action_space, encoder="auto", image_features=16, normalize_observations=True
    )
    policy.update_normalizers(_batch(256, 1), dist=SingleProcess())
    model = DeterministicPolicy(policy, _SPACE)
    assert model.obs_dim == 1 + 147 + 2
    target = export_policy(model, tmp_path / f"policy.{export_format}", export_format=export_format)
    obs = _batch(32, 2)
    with torch.no_grad():
        expected = policy.act(obs, deterministic=True)["action"]
    flat = _flat(obs, policy.actor_keys)
    torch.testing.assert_close(model(flat), expected)
    got = _run(target, export_format, flat)
    if isinstance(action_space, gym.spaces.Discrete):
        assert torch.equal(got, expected)
    else:
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("export_format", ["onnx", "torchscript"])
def test_a_nature_cnn_exports_with_its_scaling(export_format: ExportFormat, tmp_path: Path) -> None:
    """Four stacked 84x84 frames (CxHxW) through the Nature CNN: the file takes the raw bytes."""
    space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    torch.manual_seed(0)
    policy = MLPActorCritic(
        space, gym.spaces.Box(-1.0, 1.0, (2,)), encoder="auto", actor_hidden=(), critic_hidden=()
    )
    model = DeterministicPolicy(policy, space)
    target = export_policy(model, tmp_path / f"policy.{export_format}", export_format=export_format)
    frames = torch.randint(0, 256, (8, 4, 84, 84), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        obs = TensorDict({"obs": frames.to(torch.uint8)}, batch_size=[8])
        expected = policy.act(obs, deterministic=True)["action"]
    got = _run(target, export_format, frames.reshape(8, -1).float())
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
