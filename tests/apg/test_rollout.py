"""Tests for typedrl.apg._collector: the differentiable rollout and its alive mask."""

import dataclasses
from typing import Any

import pytest
import torch
from jaxtyping import TypeCheckError
from tensordict import TensorDict

from typedrl.apg._adjoint import ActionAdjointClipper
from typedrl.apg._collector import DifferentiableRollout, first_done_mask
from typedrl.episodes import EpochEpisodes


def _fields(num_steps: int = 3, num_envs: int = 2) -> dict[str, Any]:
    def obs(*batch: int) -> TensorDict:
        return TensorDict({"obs": torch.zeros(*batch, 4)}, batch_size=list(batch))

    flags = torch.zeros(num_steps, num_envs, dtype=torch.bool)
    scalars = torch.zeros(num_steps, num_envs)
    rows = torch.zeros(num_envs)
    return {
        "initial_observation": obs(num_envs),
        "observations": obs(num_steps, num_envs),
        "actions": torch.zeros(num_steps, num_envs, 2),
        "rewards": scalars,
        "entropies": scalars.clone(),
        "terminated": flags,
        "truncated": flags.clone(),
        "valid": ~flags,
        "alive_mask": ~flags,
        "terminal_observations": obs(num_steps, num_envs),
        "final_observation": obs(num_envs),
        "episodes": EpochEpisodes(
            returns=scalars.double(),
            lengths=scalars.long(),
            ended=flags,
            return_so_far=rows.double(),
            length_so_far=rows.long(),
        ),
        "adjoint": ActionAdjointClipper(max_norm=None, device="cpu"),
    }


def test_first_done_mask_keeps_the_first_done_step() -> None:
    """Alive until and including each row's first done; every later step is not."""
    done = torch.tensor(
        [[False, False, True], [True, False, False], [False, False, True], [True, False, False]]
    )
    alive = first_done_mask(done)
    assert alive.tolist() == [
        [True, True, True],
        [True, True, False],
        [False, True, False],
        [False, True, False],
    ]


def test_first_done_mask_of_no_step_is_empty() -> None:
    """An empty rollout has an empty mask of the same shape."""
    alive = first_done_mask(torch.zeros(0, 3, dtype=torch.bool))
    assert alive.shape == (0, 3)
    assert alive.dtype == torch.bool


def test_shape_properties() -> None:
    """num_steps and num_envs come from the per-step fields, empty rollouts included."""
    rollout = DifferentiableRollout(**_fields(3, 2))
    assert (rollout.num_steps, rollout.num_envs) == (3, 2)
    empty = DifferentiableRollout(**_fields(0, 2))
    assert (empty.num_steps, empty.num_envs) == (0, 2)


def test_is_frozen() -> None:
    """Fields cannot be reassigned."""
    rollout = DifferentiableRollout(**_fields())
    with pytest.raises(dataclasses.FrozenInstanceError):
        rollout.rewards = torch.ones(3, 2)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("rewards", torch.zeros(3), "rewards"),
        ("entropies", torch.zeros(3, 5), "entropies"),
        ("alive_mask", torch.ones(3, 2), "alive_mask"),
        ("actions", torch.zeros(4, 2, 2), "actions"),
        ("final_observation", torch.zeros(2), "final_observation"),
        ("episodes", (), "episodes"),
        ("adjoint", "clipper", "adjoint"),
    ],
)
def test_annotations_refuse_misshapen_fields(name: str, value: object, message: str) -> None:
    """Under the suites' runtime checks, a field off its annotated type or shape is refused."""
    fields = _fields()
    fields[name] = value
    with pytest.raises(TypeCheckError, match=message):
        DifferentiableRollout(**fields)


def test_detach_cuts_every_graph() -> None:
    """detach() keeps the values and drops the graph of every tensor field."""
    weight = torch.ones((), requires_grad=True)
    fields = _fields()
    fields["rewards"] = fields["rewards"] * weight
    fields["actions"] = fields["actions"] * weight
    rollout = DifferentiableRollout(**fields)
    detached = rollout.detach()
    assert rollout.rewards.requires_grad
    assert not detached.rewards.requires_grad
    assert not detached.actions.requires_grad
    assert torch.equal(detached.rewards, rollout.rewards.detach())
    assert detached.adjoint is None
