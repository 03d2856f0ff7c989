"""A deterministic counting vector env with configurable episode ends."""

from collections.abc import Sequence
from typing import Any, Final, Literal, final

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict

from typedrl._results import StepResult
from typedrl._tensor_checks import ActionChecker
from typedrl._validation import describe
from typedrl.errors import ConfigError
from typedrl.types import Action, Obs

__all__ = ["CountingVecEnv"]


def _per_row(name: str, value: int | Sequence[int] | None, num_envs: int) -> torch.Tensor:
    """Broadcast an episode-end setting to one int64 limit per row (0 means never)."""
    if value is None:
        return torch.zeros(num_envs, dtype=torch.int64)
    rows = [value] * num_envs if isinstance(value, int) else list(value)
    if len(rows) != num_envs or any(v <= 0 for v in rows):
        raise ConfigError(
            f"CountingVecEnv.{name} must be None, a positive int or {num_envs} positive ints, "
            f"got {describe(value)}"
        )
    return torch.tensor(rows, dtype=torch.int64)


@final
class CountingVecEnv:
    """A vector env whose rows count steps: the simplest exact test of autoreset.

    Each row's observation ``obs["obs"]`` is ``[t, episode, row]`` (float32):
    ``t`` counts steps in the current episode (0 right after a reset),
    ``episode`` counts the row's completed episodes and ``row`` is the row index.
    The reward of a step is the new ``t``. Row ``i`` terminates when ``t``
    reaches ``terminate_after[i]`` and is truncated when ``t`` reaches
    ``truncate_after[i]`` (both flags are set when both limits are hit). Rows
    that end are reset in the same step; ``final_obs`` holds their terminal
    observation.

    Args:
        num_envs: Number of rows.
        terminate_after: Episode length at which a row terminates: one int for
            all rows, one per row, or ``None`` for never.
        truncate_after: Episode length at which a row is truncated, likewise.
        action_space: ``"box"`` for a ``Box(-1, 1, (1,))`` action, ``"discrete"``
            for ``Discrete(2)``. The action does not influence the dynamics.
        device: Device of every tensor.
        provides_final_obs: When ``False``, the env reports that it cannot
            provide terminal observations and returns ``final_obs=None``.

    Example:
        >>> import torch
        >>> env = CountingVecEnv(num_envs=2, terminate_after=[2, 3])
        >>> obs, _ = env.reset(seed=0)
        >>> action = torch.zeros(2, 1)
        >>> _ = env.step(action)
        >>> obs, reward, terminated, truncated, info = result = env.step(action)
        >>> terminated.tolist(), obs["obs"][:, 0].tolist(), result.final_obs["obs"][:, 0].tolist()
        ([True, False], [0.0, 2.0], [2.0, 2.0])
    """

    def __init__(
        self,
        *,
        num_envs: int,
        terminate_after: int | Sequence[int] | None = None,
        truncate_after: int | Sequence[int] | None = None,
        action_space: Literal["box", "discrete"] = "box",
        device: torch.device | str = "cpu",
        provides_final_obs: bool = True,
    ) -> None:
        if num_envs <= 0:
            raise ConfigError(f"CountingVecEnv.num_envs must be positive, got {num_envs!r}")
        self.num_envs: Final = num_envs
        """Number of rows."""
        self.device: Final = torch.device(device)
        """Device of every tensor."""
        self.provides_final_obs: Final = provides_final_obs
        """As configured."""
        self.single_observation_space: Final[gym.Space[Any]] = gym.spaces.Box(
            -np.inf, np.inf, (3,), np.float32
        )
        """``Box(-inf, inf, (3,), float32)``."""
        self.single_action_space: Final[gym.Space[Any]] = (
            gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
            if action_space == "box"
            else gym.spaces.Discrete(2)
        )
        """``Box(-1, 1, (1,))`` or ``Discrete(2)``."""
        self._check_action = ActionChecker(
            num_envs=num_envs,
            space=self.single_action_space,
            device=self.device,
            where="CountingVecEnv.step",
        )
        self._terminate_after = _per_row("terminate_after", terminate_after, num_envs).to(
            self.device
        )
        self._truncate_after = _per_row("truncate_after", truncate_after, num_envs).to(self.device)
        self._t = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self._episode = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self._rows = torch.arange(num_envs, dtype=torch.int64, device=self.device)
        self.closed = False
        """Whether :meth:`close` has been called."""
        self.last_action: Action | None = None
        """The most recent action passed to :meth:`step`."""

    def _observe(self, t: torch.Tensor, episode: torch.Tensor) -> Obs:
        features = torch.stack((t, episode, self._rows), dim=-1).to(torch.float32)
        return TensorDict({"obs": features}, batch_size=[self.num_envs], device=self.device)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        """Reset every row to ``t = 0`` and ``episode = 0``; the env is deterministic."""
        del seed, options
        self._t.zero_()
        self._episode.zero_()
        return self._observe(self._t, self._episode), {}

    def step(self, action: Action) -> StepResult:
        """Count one step in every row, ending and resetting rows at their limits."""
        self._check_action(action)
        self.last_action = action
        t = self._t + 1
        terminated = (self._terminate_after > 0) & (t == self._terminate_after)
        truncated = (self._truncate_after > 0) & (t == self._truncate_after)
        done = terminated | truncated
        final_obs = self._observe(t, self._episode) if self.provides_final_obs else None
        self._t = torch.where(done, torch.zeros_like(t), t)
        self._episode = self._episode + done.to(torch.int64)
        reward = t.to(torch.float32)
        return StepResult(
            self._observe(self._t, self._episode),
            reward,
            terminated,
            truncated,
            {},
            final_obs=final_obs,
        )

    def close(self) -> None:
        """Mark the env closed."""
        self.closed = True
