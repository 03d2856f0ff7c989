"""Fakes of Isaac Lab's manager-based and direct RL envs, to test adapters on a CPU.

The fakes reproduce the env surface an RL wrapper sees, with upstream's
semantics where it matters: the order of operations inside ``step`` (actions,
``decimation`` physics sub-steps, counters, terminations, rewards, reset of the
rows that ended, observations of all rows), persistent flag (and, for the
manager-based env, reward) buffers overwritten in place on every step, one
``extras`` dict reused across steps, ``extras["log"]`` written only when rows
reset (a new dict each time for the manager-based env, one dict updated in place
by the direct task, as Isaac Lab's cartpole tasks do) and ``extras["final_obs"]``
(with ``compute_final_obs``) written only on steps where some row ended and never
deleted afterwards. Log values are 0-d float32 tensors, as upstream writes them.

The simulated system is a batch of points: each physics sub-step moves a point
by ``sim_dt * action``. A row terminates when a coordinate leaves
``[-termination_radius, termination_radius]`` and times out when its episode
length reaches ``max_episode_length``. The reward is ``-|position|^2``.
"""

import math
import secrets
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal, final

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from typedrl import _config_fields
from typedrl._config_fields import check, optional
from typedrl._validation import describe, non_negative_float, positive_float, positive_int
from typedrl.envs._isaaclab import IsaacLabObs
from typedrl.errors import ConfigError
from typedrl.types import Action, Done, Reward

__all__ = ["FakeDirectRLEnv", "FakeManagerBasedRLEnv", "FakeRLEnvCfg"]

_StepReturn = tuple[IsaacLabObs, Reward, Done, Done, dict[str, Any]]


def _int(owner: str, name: str, value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ConfigError(f"{owner}.{name} must be an int, got {describe(value)}")


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class FakeRLEnvCfg:
    """Configuration of :class:`FakeManagerBasedRLEnv` and :class:`FakeDirectRLEnv`.

    Field names follow Isaac Lab's env configs where one exists (``decimation``,
    ``episode_length_s``, ``is_finite_horizon``, ``compute_final_obs``, ``seed``);
    ``num_envs``, ``sim_dt`` and ``device`` stand in for ``scene.num_envs``,
    ``sim.dt`` and ``sim.device``.

    Example:
        >>> cfg = FakeRLEnvCfg(num_envs=2, decimation=2, sim_dt=0.05, episode_length_s=1.0)
        >>> FakeManagerBasedRLEnv(cfg).max_episode_length
        10
    """

    num_envs: int = field(default=4, metadata=check(positive_int))
    """Number of parallel environments (``scene.num_envs`` upstream)."""

    action_dim: int = field(default=2, metadata=check(positive_int))
    """Dimension of the point's position and of the action."""

    sim_dt: float = field(default=0.05, metadata=check(positive_float))
    """Physics time step in seconds (``sim.dt`` upstream)."""

    decimation: int = field(default=2, metadata=check(positive_int))
    """Physics sub-steps per env step."""

    episode_length_s: float = field(default=1.0, metadata=check(positive_float))
    """Episode duration in seconds; ``max_episode_length = ceil(episode_length_s / step_dt)``."""

    termination_radius: float = field(default=2.0, metadata=check(positive_float))
    """A row terminates when a coordinate's magnitude exceeds this (> 0)."""

    init_range: float = field(default=1.0, metadata=check(non_negative_float))
    """Initial positions are uniform in ``[-init_range, init_range]`` (>= 0)."""

    action_bound: float | None = field(default=None, metadata=check(optional(positive_float)))
    """Bound of the Box action space; ``None`` for unbounded, as Isaac Lab declares."""

    is_finite_horizon: bool = False
    """Isaac Lab's flag: time-outs end a finite-horizon MDP (read by wrappers only)."""

    compute_final_obs: bool = False
    """Isaac Lab's flag: store pre-reset observations in ``extras["final_obs"]``."""

    critic: Literal["concatenated", "nested", "none"] = "concatenated"
    """Layout of the ``"critic"`` group (position, last action, episode progress):
    one concatenated tensor, a dict of terms, or no critic group at all."""

    seed: int | None = field(default=None, metadata=check(optional(_int)))
    """Seed of the env's generator at construction; ``None`` leaves it unseeded."""

    device: str = "cpu"
    """Simulation device."""

    def __post_init__(self) -> None:
        _config_fields.validate(self)


def _action_space(cfg: FakeRLEnvCfg) -> gym.spaces.Box:
    """``Box(-action_bound, action_bound, (action_dim,))``, unbounded without a bound."""
    bound = math.inf if cfg.action_bound is None else cfg.action_bound
    return gym.spaces.Box(-bound, bound, (cfg.action_dim,), np.float32)


def _observation_groups(cfg: FakeRLEnvCfg) -> dict[str, gym.Space[Any]]:
    """The ``"policy"`` group and the ``"critic"`` group in ``cfg.critic``'s layout."""
    inf, dim = math.inf, cfg.action_dim
    groups: dict[str, gym.Space[Any]] = {"policy": gym.spaces.Box(-inf, inf, (dim,))}
    if cfg.critic == "concatenated":
        groups["critic"] = gym.spaces.Box(-inf, inf, (2 * dim + 1,))
    elif cfg.critic == "nested":
        groups["critic"] = gym.spaces.Dict(
            {
                "position": gym.spaces.Box(-inf, inf, (dim,)),
                "last_action": gym.spaces.Box(-inf, inf, (dim,)),
                "progress": gym.spaces.Box(0.0, 1.0, (1,)),
            }
        )
    return groups


class _BaseFakeRLEnv(ABC):
    """State, spaces and the point-mass task shared by both fakes."""

    def __init__(self, cfg: FakeRLEnvCfg, render_mode: str | None = None, **kwargs: Any) -> None:
        del kwargs
        self.cfg = cfg
        """The env config."""
        self.render_mode = render_mode
        """Accepted for signature compatibility; the fakes do not render."""
        self.num_envs: Final = cfg.num_envs
        """Number of parallel environments."""
        self.device: Final = cfg.device
        """Simulation device, a string as upstream."""
        self.physics_dt: Final = cfg.sim_dt
        """Physics time step in seconds."""
        self.max_episode_length_s: Final = cfg.episode_length_s
        """Episode duration in seconds."""
        n, dim = cfg.num_envs, cfg.action_dim
        device = torch.device(cfg.device)
        self._generator = torch.Generator(device=device)
        if cfg.seed is not None:
            self._generator.manual_seed(self.seed(cfg.seed))
        self.extras: dict[str, Any] = {}
        """One dict, mutated in place by every step and reset and returned by reference."""
        self.obs_buf: IsaacLabObs = {}
        """The latest observations."""
        self.common_step_counter = 0
        """Env steps taken since construction (all rows together)."""
        self.episode_length_buf = torch.zeros(n, dtype=torch.int64, device=device)
        """Steps in the current episode, per row."""
        self.reset_buf = torch.zeros(n, dtype=torch.bool, device=device)
        """``reset_terminated | reset_time_outs`` of the latest step."""
        self.reset_terminated = torch.zeros(n, dtype=torch.bool, device=device)
        """Terminations of the latest step; overwritten in place by the next step."""
        self.reset_time_outs = torch.zeros(n, dtype=torch.bool, device=device)
        """Time-outs of the latest step; overwritten in place by the next step."""
        self.reward_buf = torch.zeros(n, dtype=torch.float32, device=device)
        """Rewards of the latest step."""
        self.position = self._sample_positions(n)
        """State of the simulated points, float32 ``[num_envs, action_dim]``."""
        self.last_action = torch.zeros(n, dim, dtype=torch.float32, device=device)
        """The action applied by the latest step (zero after a reset)."""
        self._episode_reward = torch.zeros(n, dtype=torch.float32, device=device)
        # Per row, which termination term (out of bounds, time-out) ended its last episode.
        self._last_episode_dones = torch.zeros(n, 2, dtype=torch.bool, device=device)
        self._sim_step_counter = 0
        self._is_closed = False
        self.single_action_space = _action_space(cfg)
        """One row's action space."""
        self.single_observation_space = gym.spaces.Dict(_observation_groups(cfg))
        """One row's observation groups."""
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, n)
        """The batched observation space."""
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, n)
        """The batched action space."""

    @property
    def step_dt(self) -> float:
        """Env time step in seconds: ``sim_dt * decimation``."""
        return self.physics_dt * self.cfg.decimation

    @property
    def max_episode_length(self) -> int:
        """Episode length in env steps: ``ceil(episode_length_s / step_dt)``."""
        return math.ceil(self.max_episode_length_s / self.step_dt)

    @property
    def unwrapped(self) -> "_BaseFakeRLEnv":
        """The env itself, as on a Gymnasium env."""
        return self

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` ran (upstream keeps this flag private)."""
        return self._is_closed

    @staticmethod
    def seed(seed: int = -1) -> int:
        """Return the seed to use; ``-1`` draws one at random.

        Upstream also seeds the global random generators; the fakes instead seed
        their own generator in ``reset(seed=...)`` and leave global state alone.
        As upstream (which seeds NumPy's legacy generator), a seed outside
        ``[0, 2**32)`` raises ``ValueError``.
        """
        if seed == -1:
            return secrets.randbelow(10_000)
        if not 0 <= seed < 2**32:
            msg = "Seed must be between 0 and 2**32 - 1"
            raise ValueError(msg)
        return seed

    def close(self) -> None:
        """Mark the env closed; calling it twice is harmless."""
        self._is_closed = True

    @abstractmethod
    def step(self, action: Action) -> _StepReturn:
        """Step every row and reset the rows that ended."""

    @abstractmethod
    def _reset_idx(self, env_ids: Tensor) -> None:
        """Reset the rows ``env_ids`` and log their episodes (each fake as its upstream)."""

    def _reset_ended_and_observe(self, observe: Callable[[], IsaacLabObs]) -> _StepReturn:
        """The end of upstream's ``step``: reset the rows that ended, then observe every row.

        With ``cfg.compute_final_obs``, a step where some row ended first writes
        every row's observation to ``extras["final_obs"]``.
        """
        reset_env_ids = self.reset_buf.nonzero(as_tuple=False).squeeze(-1)
        if len(reset_env_ids) > 0:
            if self.cfg.compute_final_obs:
                self.extras["final_obs"] = observe()
            self._reset_idx(reset_env_ids)
        self.obs_buf = observe()
        return (
            self.obs_buf,
            self.reward_buf,
            self.reset_terminated,
            self.reset_time_outs,
            self.extras,
        )

    def _sample_positions(self, count: int) -> Tensor:
        noise = torch.rand(
            count,
            self.cfg.action_dim,
            generator=self._generator,
            device=self._generator.device,
        )
        return (2.0 * noise - 1.0) * self.cfg.init_range

    def _apply_action(self, action: Tensor) -> None:
        """One physics sub-step: every point moves by ``sim_dt * action``."""
        self._sim_step_counter += 1
        self.position = self.position + self.cfg.sim_dt * action

    def _update_counters(self) -> None:
        self.episode_length_buf += 1
        self.common_step_counter += 1

    def _compute_dones(self) -> tuple[Tensor, Tensor]:
        """Fresh ``(terminated, time_outs)`` tensors for the current state.

        Rows where a term fired also record which terms did, as Isaac Lab's
        termination manager does for its ``Episode_Termination`` log.
        """
        out_of_bounds = self.position.abs().amax(dim=-1) > self.cfg.termination_radius
        time_out = self.episode_length_buf >= self.max_episode_length
        dones = torch.stack((out_of_bounds, time_out), dim=-1)
        fired = dones.any(dim=-1, keepdim=True)
        self._last_episode_dones = torch.where(fired, dones, self._last_episode_dones)
        return out_of_bounds, time_out

    def _compute_rewards(self) -> Tensor:
        """A fresh reward tensor for the current state; also sums the episode reward."""
        reward = -(self.position**2).sum(dim=-1)
        self._episode_reward += reward
        return reward

    def _compute_observations(self) -> IsaacLabObs:
        """Fresh observation tensors of every row, as Isaac Lab computes them."""
        obs: IsaacLabObs = {"policy": self.position.clone()}
        progress = (self.episode_length_buf.to(torch.float32) / self.max_episode_length)[:, None]
        if self.cfg.critic == "concatenated":
            obs["critic"] = torch.cat((self.position, self.last_action, progress), dim=-1)
        elif self.cfg.critic == "nested":
            obs["critic"] = {
                "position": self.position.clone(),
                "last_action": self.last_action.clone(),
                "progress": progress,
            }
        return obs

    def _episode_log(self, env_ids: Tensor) -> dict[str, Tensor]:
        """Statistics of the episodes that end at ``env_ids``, in Isaac Lab's key style.

        ``Episode_Reward/distance`` is the mean episode reward of those rows per
        second, ``Metrics/success_rate`` the fraction of them that timed out, and
        ``Episode_Termination/<term>`` the fraction of *all* rows whose latest
        episode ended by that term (upstream's termination manager), each a 0-d
        float32 tensor.
        """
        termination = self._last_episode_dones.to(torch.float32).mean(dim=0)
        return {
            "Episode_Reward/distance": self._episode_reward[env_ids].mean()
            / self.max_episode_length_s,
            "Metrics/success_rate": self.reset_time_outs[env_ids].to(torch.float32).mean(),
            "Episode_Termination/out_of_bounds": termination[0],
            "Episode_Termination/time_out": termination[1],
        }

    def _reset_state(self, env_ids: Tensor) -> None:
        self.position[env_ids] = self._sample_positions(int(env_ids.numel()))
        self.last_action[env_ids] = 0.0
        self._episode_reward[env_ids] = 0.0
        self.episode_length_buf[env_ids] = 0

    def _all_env_ids(self) -> Tensor:
        return torch.arange(self.num_envs, dtype=torch.int64, device=self.cfg.device)


@final
class FakeManagerBasedRLEnv(_BaseFakeRLEnv):
    """A fake of ``isaaclab.envs.ManagerBasedRLEnv`` (Isaac Lab 3.x signatures).

    ``step`` returns the persistent reward and flag buffers, overwritten in place
    by the next step, as Isaac Lab's reward and termination managers do.
    ``extras["log"]`` is replaced by a new dict whenever rows reset (in ``step``
    and in ``reset``).

    Args:
        cfg: The env config.
        render_mode: Accepted and ignored.
        **kwargs: Accepted and ignored, as upstream.

    Example:
        >>> import torch
        >>> env = FakeManagerBasedRLEnv(FakeRLEnvCfg(num_envs=2, seed=0))
        >>> obs, extras = env.reset(seed=0)
        >>> sorted(obs), sorted(extras["log"])[0]
        (['critic', 'policy'], 'Episode_Reward/distance')
        >>> obs, reward, terminated, time_outs, extras = env.step(torch.zeros(2, 2))
        >>> env.episode_length_buf.tolist(), terminated.dtype
        ([1, 1], torch.bool)
    """

    def reset(
        self,
        env_ids: Tensor | slice | None = None,
        *,
        seed: int | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[IsaacLabObs, dict[str, Any]]:
        """Reset the rows ``env_ids`` (all rows for ``None``) and observe every row.

        Args:
            env_ids: A 1-D integer tensor of row indices, a slice, or ``None``.
            seed: Reseeds the env's generator before the reset.
            options: Accepted and ignored, as upstream.

        Returns:
            ``(obs, extras)``; ``extras["log"]`` describes the interrupted episodes.
        """
        del options
        if env_ids is None:
            ids = self._all_env_ids()
        elif isinstance(env_ids, slice):
            ids = self._all_env_ids()[env_ids]
        else:
            ids = env_ids.to(device=self.cfg.device, dtype=torch.int64)
        if seed is not None:
            self._generator.manual_seed(self.seed(seed))
        self._reset_idx(ids)
        self.obs_buf = self._compute_observations()
        return self.obs_buf, self.extras

    def step(self, action: Action) -> _StepReturn:
        """Step every row with Isaac Lab's ordering and reset the rows that ended.

        Returns:
            ``(obs, reward, terminated, time_outs, extras)``.
        """
        # -- process actions, then physics at sim_dt
        processed = action.to(device=self.cfg.device, dtype=torch.float32).clone()
        self.last_action = processed
        for _ in range(self.cfg.decimation):
            self._apply_action(processed)
        # -- counters
        self._update_counters()
        # -- terminations, written into the manager's persistent buffers
        terminated, time_outs = self._compute_dones()
        self.reset_terminated[:] = terminated
        self.reset_time_outs[:] = time_outs
        self.reset_buf = self.reset_terminated | self.reset_time_outs
        # -- rewards, likewise in place
        self.reward_buf[:] = self._compute_rewards()
        # -- reset the rows that ended, then observations of every row
        return self._reset_ended_and_observe(self._compute_observations)

    def _reset_idx(self, env_ids: Tensor) -> None:
        self.extras["log"] = self._episode_log(env_ids)
        self._reset_state(env_ids)


@final
class FakeDirectRLEnv(_BaseFakeRLEnv):
    """A fake of ``isaaclab.envs.DirectRLEnv`` together with a task built on it.

    Upstream's base class never writes ``extras["log"]``; tasks fill it in their
    ``_reset_idx``, as this fake's task does: like Isaac Lab's direct cartpole
    (``extras.setdefault("log", {})[key] = value``), it updates one dict in place,
    so only the values, not the dict, are new on each reset. ``reset`` always
    resets every row.
    ``step`` returns persistent flag buffers overwritten in place by the next
    step and a fresh reward tensor, as upstream.

    Args:
        cfg: The env config.
        render_mode: Accepted and ignored.
        **kwargs: Accepted and ignored, as upstream.

    Example:
        >>> import torch
        >>> env = FakeDirectRLEnv(FakeRLEnvCfg(num_envs=3, critic="none"))
        >>> obs, extras = env.reset(seed=1)
        >>> list(obs), obs["policy"].shape
        (['policy'], torch.Size([3, 2]))
    """

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[IsaacLabObs, dict[str, Any]]:
        """Reset every row.

        Args:
            seed: Reseeds the env's generator before the reset.
            options: Accepted and ignored, as upstream.

        Returns:
            ``(obs, extras)``.
        """
        del options
        if seed is not None:
            self._generator.manual_seed(self.seed(seed))
        self._reset_idx(self._all_env_ids())
        self.obs_buf = self._get_observations()
        return self.obs_buf, self.extras

    def step(self, action: Action) -> _StepReturn:
        """Step every row with Isaac Lab's ordering and reset the rows that ended.

        Returns:
            ``(obs, reward, terminated, time_outs, extras)``.
        """
        self._pre_physics_step(action.to(self.cfg.device))
        for _ in range(self.cfg.decimation):
            self._apply_action(self.last_action)
        self._update_counters()
        self.reset_terminated[:], self.reset_time_outs[:] = self._get_dones()
        self.reset_buf = self.reset_terminated | self.reset_time_outs
        self.reward_buf = self._get_rewards()
        return self._reset_ended_and_observe(self._get_observations)

    def _pre_physics_step(self, actions: Tensor) -> None:
        self.last_action = actions.to(torch.float32).clone()

    def _get_dones(self) -> tuple[Tensor, Tensor]:
        return self._compute_dones()

    def _get_rewards(self) -> Tensor:
        return self._compute_rewards()

    def _get_observations(self) -> IsaacLabObs:
        return self._compute_observations()

    def _reset_idx(self, env_ids: Tensor) -> None:
        # The task's override: log the ending episodes into the one log dict, then reset.
        self.extras.setdefault("log", {}).update(self._episode_log(env_ids))
        self._reset_state(env_ids)
