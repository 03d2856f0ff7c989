"""A one-dimensional differentiable env with a quadratic cost, and a scheduled variant."""

from collections.abc import Sequence
from typing import Any, Final, Literal, final

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict

from typedrl._results import DifferentiableRolloutSpec, StepResult
from typedrl._tensor_checks import ActionChecker
from typedrl._validation import non_negative_int, positive_int
from typedrl.envs._wrapper import DifferentiableVecEnvWrapper
from typedrl.errors import CheckpointError, ConfigError
from typedrl.types import Action, EnvScalar, Obs, ObsMask

__all__ = ["QuadraticEnv", "ScheduledQuadraticEnv"]


@final
class QuadraticEnv:
    """Drive a scalar state to zero: ``x' = x + a``, reward ``-x'^2``.

    Differentiable end to end: the reward and the next observation keep the
    autograd path to the action and to earlier actions through ``x``. Every
    episode lasts ``horizon`` steps and ends truncated; the row then restarts
    from a fresh, graph-free ``x0 ~ U(-init_scale, init_scale)`` drawn from the
    env's own seeded generator, while ``final_obs`` keeps the terminal state's
    graph.

    Args:
        num_envs: Number of rows.
        horizon: Steps per episode (time limit, reported as truncation).
        init_scale: Half-width of the initial-state distribution.
        dtype: ``"float32"`` or ``"float64"`` (use float64 for gradient checks).
        device: Device of every tensor.

    Example:
        >>> import torch
        >>> env = QuadraticEnv(num_envs=3, horizon=4)
        >>> obs, _ = env.reset(seed=0)
        >>> action = (-obs["obs"]).requires_grad_()
        >>> result = env.step(action)
        >>> result.reward.sum().backward()
        >>> bool(torch.allclose(result.reward, torch.zeros(3)))
        True
    """

    def __init__(
        self,
        *,
        num_envs: int,
        horizon: int = 10,
        init_scale: float = 1.0,
        dtype: Literal["float32", "float64"] = "float32",
        device: torch.device | str = "cpu",
    ) -> None:
        positive_int("QuadraticEnv", "num_envs", num_envs)
        positive_int("QuadraticEnv", "horizon", horizon)
        self.num_envs: Final = num_envs
        """Number of rows."""
        self.device: Final = torch.device(device)
        """Device of every tensor."""
        self.provides_final_obs: Final = True
        """Always ``True``."""
        self.single_observation_space: Final[gym.Space[Any]] = gym.spaces.Box(
            -np.inf, np.inf, (1,), np.dtype(dtype)
        )
        """``Box(-inf, inf, (1,))``."""
        self.single_action_space: Final[gym.Space[Any]] = gym.spaces.Box(
            -10.0, 10.0, (1,), np.dtype(dtype)
        )
        """``Box(-10, 10, (1,))``."""
        self._check_action = ActionChecker(
            num_envs=num_envs,
            space=self.single_action_space,
            device=self.device,
            where="QuadraticEnv.step",
        )
        self.horizon = horizon
        """Current episode length; a scheduled wrapper may change it between rollouts."""
        self._init_scale = float(init_scale)
        self._dtype = getattr(torch, dtype)
        self._generator = torch.Generator(device=self.device)
        self._x = torch.zeros(num_envs, 1, dtype=self._dtype, device=self.device)
        self._t = torch.zeros(num_envs, dtype=torch.int64, device=self.device)

    @property
    def observation_normalize_mask(self) -> ObsMask:
        """The single feature may be normalised."""
        return torch.ones(1, dtype=torch.bool, device=self.device)

    def _sample_initial(self, count: int) -> torch.Tensor:
        unit = torch.rand(
            count, 1, generator=self._generator, dtype=self._dtype, device=self.device
        )
        return (2.0 * unit - 1.0) * self._init_scale

    def _observe(self, x: torch.Tensor) -> Obs:
        return TensorDict({"obs": x}, batch_size=[self.num_envs], device=self.device)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        """Draw fresh initial states for every row (seeded when ``seed`` is given)."""
        del options
        if seed is not None:
            self._generator.manual_seed(seed)
        self._x = self._sample_initial(self.num_envs)
        self._t = torch.zeros_like(self._t)
        return self._observe(self._x), {}

    def step(self, action: Action) -> StepResult:
        """Apply ``x' = x + a``; reward ``-x'^2``; rows at the horizon restart detached."""
        self._check_action(action)
        next_x = self._x + action.to(self._dtype)
        reward = -(next_x**2).squeeze(-1)
        t = self._t + 1
        truncated = t >= self.horizon
        terminated = torch.zeros_like(truncated)
        # Rows that end restart from a graph-free initial state (same-step autoreset);
        # a fresh draw for every row keeps the generator's stream independent of
        # which rows ended.
        fresh = self._sample_initial(self.num_envs)
        self._x = torch.where(truncated.unsqueeze(-1), fresh, next_x)
        self._t = torch.where(truncated, torch.zeros_like(t), t)
        return StepResult(
            self._observe(self._x),
            reward,
            terminated,
            truncated,
            {},
            final_obs=self._observe(next_x),
        )

    def detach_state(self) -> Obs:
        """Cut the graph at the current state without changing its value."""
        self._x = self._x.detach()
        return self._observe(self._x)

    def close(self) -> None:
        """Nothing to release."""


@final
class ScheduledQuadraticEnv(DifferentiableVecEnvWrapper):
    """:class:`QuadraticEnv` with a curriculum: rollout ``k`` lasts ``horizons[k % len]`` steps.

    Implements :class:`~typedrl.protocols.ScheduledDifferentiableVecEnv`; every
    other member is the wrapped :class:`QuadraticEnv`'s.

    Example:
        >>> env = ScheduledQuadraticEnv(num_envs=2, horizons=[3, 6])
        >>> [env.prepare_differentiable_rollout(k).num_steps for k in range(3)]
        [3, 6, 3]
    """

    def __init__(
        self,
        *,
        num_envs: int,
        horizons: Sequence[int],
        init_scale: float = 1.0,
        dtype: Literal["float32", "float64"] = "float32",
        device: torch.device | str = "cpu",
    ) -> None:
        checked = [positive_int("ScheduledQuadraticEnv", "horizons[]", h) for h in horizons]
        if not checked:
            raise ConfigError("ScheduledQuadraticEnv.horizons must not be empty")
        self._horizons = checked
        self._env = QuadraticEnv(
            num_envs=num_envs, horizon=checked[0], init_scale=init_scale, dtype=dtype, device=device
        )
        super().__init__(self._env)

    def prepare_differentiable_rollout(self, rollout_index: int) -> DifferentiableRolloutSpec:
        """Set the next rollout's horizon from the schedule and return its spec."""
        non_negative_int("ScheduledQuadraticEnv", "rollout_index", rollout_index)
        horizon = self._horizons[rollout_index % len(self._horizons)]
        self._env.horizon = horizon
        return DifferentiableRolloutSpec(
            num_steps=horizon, metadata={"horizon": float(horizon), "stage": float(rollout_index)}
        )


@final
class ContactQuadraticEnv(DifferentiableVecEnvWrapper):
    """:class:`QuadraticEnv` with a synthetic contact force, ``contact_scale * |x'|`` per row.

    Implements :class:`~typedrl.protocols.SupportsContactForces`: after each step
    :meth:`contact_force_norm` is the scaled distance of the state the step
    reached (the terminal state where a row ended) from zero, detached. It is
    checkpointable (``state_dict``), so a resumed run continues its rows exactly.
    Every other member is the wrapped :class:`QuadraticEnv`'s.

    Example:
        >>> import torch
        >>> env = ContactQuadraticEnv(num_envs=2, horizon=4, contact_scale=100.0)
        >>> obs, _ = env.reset(seed=0)
        >>> result = env.step(torch.ones(2, 1) - obs["obs"])
        >>> env.contact_force_norm().tolist()
        [100.0, 100.0]
    """

    def __init__(
        self,
        *,
        num_envs: int,
        horizon: int = 10,
        init_scale: float = 1.0,
        contact_scale: float = 1.0,
        dtype: Literal["float32", "float64"] = "float32",
        device: torch.device | str = "cpu",
    ) -> None:
        self._env = QuadraticEnv(
            num_envs=num_envs, horizon=horizon, init_scale=init_scale, dtype=dtype, device=device
        )
        super().__init__(self._env)
        self.contact_scale = contact_scale
        self._contact = torch.zeros(num_envs, dtype=getattr(torch, dtype), device=self._env.device)

    def step(self, action: Action) -> StepResult:
        """Step the wrapped env and measure each row's contact force."""
        result = self._env.step(action)
        if result.final_obs is not None:
            reached = result.final_obs["obs"].detach().squeeze(-1)
            self._contact = self.contact_scale * reached.abs()
        return result

    def contact_force_norm(self) -> EnvScalar:
        """``contact_scale * |x'|`` of the last step, per row (detached)."""
        return self._contact

    def state_dict(self) -> dict[str, Any]:
        """The rows' states and clocks, the generator's state and the last contacts."""
        env = self._env
        return {
            "x": env._x.detach().clone(),
            "t": env._t.clone(),
            "generator": env._generator.get_state(),
            "contact": self._contact.clone(),
        }

    def load_state_dict(self, state_dict: dict[str, Any], /) -> None:
        """Restore :meth:`state_dict`'s output (the rows restart graph-free).

        Raises:
            CheckpointError: ``state_dict`` has other keys (saved from another env,
                or through a wrapper with state of its own).
        """
        expected = sorted(self.state_dict())
        if sorted(state_dict) != expected:
            raise CheckpointError(
                f"ContactQuadraticEnv.load_state_dict: expected keys {expected}, "
                f"got {sorted(state_dict)}"
            )
        env = self._env
        env._x = state_dict["x"].clone()
        env._t = state_dict["t"].clone()
        env._generator.set_state(state_dict["generator"])
        self._contact = state_dict["contact"].clone()
