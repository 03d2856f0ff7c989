"""Tests for typedrl.export's recurrent export: a policy exported with its state, to 1e-5."""

import importlib
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from tests.multiprocess import run_in_fresh_process
from typedrl.errors import ConfigError
from typedrl.export import (
    DeterministicPolicy,
    RecurrentDeterministicPolicy,
    export_recurrent_policy,
)
from typedrl.policies import RecurrentActorCritic, RecurrentCore

SPACE = gym.spaces.Box(-5.0, 5.0, (3,))


def _policy(core: RecurrentCore, action_space: gym.Space[object]) -> RecurrentActorCritic:
    torch.manual_seed(0)
    policy = RecurrentActorCritic(
        SPACE, action_space, core=core, hidden_size=16, normalize_observations=True
    )
    # Non-trivial statistics, baked into the export.
    assert policy.obs_normalizers is not None
    normalizer = policy.obs_normalizers["obs"]
    normalizer.mean.fill_(0.5)  # type: ignore[operator]
    normalizer.var.fill_(4.0)  # type: ignore[operator]
    return policy


Step = Callable[[np.ndarray, list[np.ndarray]], list[np.ndarray]]
"""``(obs, state) -> [action, *next_state]`` of an exported file."""


def _onnx_step(path: Path, state_keys: tuple[str, ...]) -> Step:
    # onnxruntime ships no type information.
    onnxruntime: Any = importlib.import_module("onnxruntime")
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["obs", *state_keys]

    def step(obs: np.ndarray, state: list[np.ndarray]) -> list[np.ndarray]:
        outputs: list[np.ndarray] = session.run(
            None, {"obs": obs, **dict(zip(state_keys, state, strict=True))}
        )
        return outputs

    return step


def _script_step(path: Path) -> Step:
    with warnings.catch_warnings():
        # PyTorch deprecates TorchScript; loading still works.
        warnings.simplefilter("ignore", DeprecationWarning)
        scripted = torch.jit.load(str(path))  # type: ignore[no-untyped-call]

    def step(obs: np.ndarray, state: list[np.ndarray]) -> list[np.ndarray]:
        with torch.no_grad():
            out = scripted(torch.from_numpy(obs), *(torch.from_numpy(entry) for entry in state))
        return [entry.numpy() for entry in out]

    return step


def _export(
    core: RecurrentCore, action_space: gym.Space[object], export_format: str, path: str
) -> None:
    model = RecurrentDeterministicPolicy(_policy(core, action_space), SPACE)
    export_recurrent_policy(model, path, export_format=export_format)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("core", "action_space"),
    [("gru", gym.spaces.Discrete(3)), ("lstm", gym.spaces.Box(-1.0, 1.0, (2,)))],
)
@pytest.mark.parametrize("export_format", ["onnx", "torchscript"])
def test_the_export_steps_as_the_policy(
    tmp_path: Path, core: RecurrentCore, action_space: gym.Space[object], export_format: str
) -> None:
    """Six steps fed their own next state equal act_step's actions and states to 1e-5."""
    path = tmp_path / f"policy.{export_format}"
    # Exported in a fresh interpreter: the suite's runtime shape-check hook breaks tracing.
    run_in_fresh_process(_export, core, action_space, export_format, str(path))
    policy = _policy(core, action_space)
    model = RecurrentDeterministicPolicy(policy, SPACE)
    obs = torch.randn(6, 5, 3) * 3
    state = policy.initial_state(5, device=torch.device("cpu"))
    inputs = [entry.numpy() for entry in model.initial_state(5)]
    step = _onnx_step(path, model.state_keys) if export_format == "onnx" else _script_step(path)
    for t in range(6):
        with torch.no_grad():
            expected = policy.act_step(
                TensorDict({"obs": obs[t]}, batch_size=[5]), state, deterministic=True
            )
        state = expected["state"]
        action, *inputs = step(obs[t].numpy(), inputs)
        np.testing.assert_allclose(action, expected["action"].numpy(), atol=1e-5)
        for key, entry in zip(model.state_keys, inputs, strict=True):
            np.testing.assert_allclose(entry, state[key].numpy(), atol=1e-5)


def test_a_flat_export_of_a_recurrent_policy_is_refused() -> None:
    """DeterministicPolicy would drop the state: one line pointing at the recurrent export."""
    policy = _policy("gru", gym.spaces.Discrete(2))
    with pytest.raises(ConfigError, match=r"RecurrentActorCritic is recurrent: .*export it with"):
        DeterministicPolicy(policy, SPACE)


def test_a_missing_folder_is_refused_before_tracing(tmp_path: Path) -> None:
    """As the flat export does: one line naming the folder; nothing is created."""
    model = RecurrentDeterministicPolicy(_policy("lstm", gym.spaces.Discrete(2)), SPACE)
    target = tmp_path / "absent" / "policy.pt"
    with pytest.raises(ConfigError, match=r"the folder .*absent does not exist"):
        export_recurrent_policy(model, target, export_format="torchscript")
    assert not target.parent.exists()


IMAGE_SPACE = gym.spaces.Dict(
    {"image": gym.spaces.Box(0, 255, (7, 7, 3), np.uint8), "direction": gym.spaces.Discrete(4)}
)


def _image_policy() -> RecurrentActorCritic:
    torch.manual_seed(3)
    return RecurrentActorCritic(IMAGE_SPACE, gym.spaces.Discrete(3), hidden_size=16)


def _export_image(export_format: str, path: str) -> None:
    model = RecurrentDeterministicPolicy(_image_policy(), IMAGE_SPACE)
    export_recurrent_policy(model, path, export_format=export_format)  # type: ignore[arg-type]


@pytest.mark.parametrize("export_format", ["onnx", "torchscript"])
def test_an_image_policy_exports_with_its_cnn(tmp_path: Path, export_format: str) -> None:
    """The CNN and its 1/255 scaling are baked in: the flat layout's bytes as floats in."""
    path = tmp_path / f"policy.{export_format}"
    run_in_fresh_process(_export_image, export_format, str(path))
    policy = _image_policy()
    assert len(policy.encoding.images) == 1
    model = RecurrentDeterministicPolicy(policy, IMAGE_SPACE)
    state = policy.initial_state(4, device=torch.device("cpu"))
    inputs = [entry.numpy() for entry in model.initial_state(4)]
    step = _onnx_step(path, model.state_keys) if export_format == "onnx" else _script_step(path)
    generator = torch.Generator().manual_seed(0)
    for _ in range(4):
        image = torch.randint(0, 256, (4, 7, 7, 3), dtype=torch.uint8, generator=generator)
        direction = torch.randint(0, 4, (4,), generator=generator)
        with torch.no_grad():
            expected = policy.act_step(
                TensorDict({"image": image, "direction": direction}, batch_size=[4]),
                state,
                deterministic=True,
            )
        state = expected["state"]
        # The flat layout: each key flattened in the space's order (direction, then image).
        flat = torch.cat([direction.float().unsqueeze(-1), image.reshape(4, -1).float()], dim=-1)
        action, *inputs = step(flat.numpy(), inputs)
        np.testing.assert_allclose(action, expected["action"].numpy(), atol=1e-5)
        np.testing.assert_allclose(inputs[0], state["h"].numpy(), atol=1e-5)
