"""The differentiable collector: steps a differentiable env with a policy, keeping the graph.

It returns a :class:`DifferentiableRollout`, whose alive mask is :func:`first_done_mask`.
"""

from dataclasses import dataclass
from typing import Any, cast, final

import gymnasium as gym
import numpy as np
import tensordict
import torch
from jaxtyping import Shaped
from tensordict import TensorDict
from torch import Tensor

from typedrl import _validation
from typedrl._collector_state import collector_state_dict, load_collector_state
from typedrl._results import step_env
from typedrl._tensor_checks import ActionChecker, action_dtype_for
from typedrl._validation import describe, non_negative_int
from typedrl.apg._adjoint import ActionAdjointClipper
from typedrl.apg._cut_rows import RolloutCuts
from typedrl.envs._checker._observations import FirstObsDtypeCheck
from typedrl.episodes import EpisodeTracker, EpochEpisodes
from typedrl.errors import CheckpointError, ConfigError, EnvContractError, SpecError
from typedrl.protocols import DifferentiablePolicy, DifferentiableVecEnv, SupportsContactForces
from typedrl.types import Obs, RolloutFlag, RolloutScalar

__all__ = ["DifferentiableCollector", "DifferentiableRollout", "first_done_mask"]


def first_done_mask(done: RolloutFlag) -> RolloutFlag:
    """Where each row is in its first episode of the rollout: until and including its first done.

    ``alive[t, i]`` is ``True`` when no step before ``t`` ended row ``i``'s
    episode; the step of the first done itself is alive (its reward is the
    episode's last), every later step is not. Pure and loop-free.

    Args:
        done: ``terminated | truncated`` per step and row.

    Example:
        >>> import torch
        >>> done = torch.tensor([[False, True], [True, False], [False, False]])
        >>> first_done_mask(done).tolist()
        [[True, True], [True, False], [False, False]]
    """
    ended = done.to(torch.int64)
    # Dones strictly before step t: the inclusive running count minus step t's own.
    return ended.cumsum(dim=0) - ended == 0


@final
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class DifferentiableRollout:
    """The graph-preserving rollout :meth:`~typedrl.apg.DifferentiableCollector.collect` returns.

    Time-major: every per-step field is ``[num_steps, num_envs, ...]``. The
    actions, rewards, entropies and observations keep their autograd graph
    back to the policy's parameters (and, until the env's
    :meth:`~typedrl.protocols.DifferentiableVecEnv.detach_state`, to earlier
    rollouts), so an objective built from them is differentiated by one
    ``backward``. Rows that end are reset inside the env's step: a step's
    reward belongs to the episode that ended, and the next step's reward to
    the new one; :attr:`alive_mask` masks everything after a row's first done
    for complete-rollout objectives.

    The package's collector builds it; its fields' shapes are annotated (and
    checked wherever jaxtyping's runtime checks are on, as in the test suites).
    An empty rollout (``num_steps == 0``) is shaped ``[0, num_envs, ...]``
    throughout.
    """

    initial_observation: Obs
    """The observation the first step acted on (``[num_envs]``)."""
    observations: TensorDict
    """The raw observation each step acted on (``[num_steps, num_envs]``; graph kept)."""
    actions: Shaped[Tensor, "num_steps num_envs *action_shape"]
    """The actions the env received, after any clipping to the bounds (graph kept)."""
    rewards: RolloutScalar
    """The env's rewards (graph kept)."""
    entropies: RolloutScalar
    """The policy's ``"entropy"`` output per step (graph kept), zeros if it has none."""
    terminated: RolloutFlag
    """Rows whose episode reached a terminal state at the step."""
    truncated: RolloutFlag
    """Rows whose episode was cut short (time limit) at the step."""
    valid: RolloutFlag
    """``False`` on ghost transitions, which must never count (always ``True`` for the
    built-in envs)."""
    alive_mask: RolloutFlag
    """``True`` until and including each row's first done of the rollout
    (:func:`first_done_mask` of ``terminated | truncated``)."""
    terminal_observations: TensorDict
    """Each step's ``final_obs`` (``[num_steps, num_envs]``; graph kept): the terminal
    observation where a row ended, the next observation elsewhere."""
    final_observation: Obs
    """The observation after the last step (``[num_envs]``), where the next rollout continues."""
    episodes: EpochEpisodes
    """Returns and lengths of the episodes that ended during the rollout (from the
    detached rewards)."""
    adjoint: ActionAdjointClipper | None
    """The clipper attached to this rollout's actions, ``None`` when neither clipping nor
    measuring; read its statistics after the backward pass."""
    contact_norms: RolloutScalar | None = None
    """Each step's contact-force norm per row
    (:meth:`~typedrl.protocols.SupportsContactForces.contact_force_norm`, detached), when
    the collector records them; else ``None``."""

    def detach(self) -> "DifferentiableRollout":
        """The same rollout cut from its graph (what an update keeps after its backward)."""
        return DifferentiableRollout(
            initial_observation=self.initial_observation.detach(),
            observations=self.observations.detach(),
            actions=self.actions.detach(),
            rewards=self.rewards.detach(),
            entropies=self.entropies.detach(),
            terminated=self.terminated,
            truncated=self.truncated,
            valid=self.valid,
            alive_mask=self.alive_mask,
            terminal_observations=self.terminal_observations.detach(),
            final_observation=self.final_observation.detach(),
            episodes=self.episodes,
            adjoint=None,
            contact_norms=self.contact_norms,
        )

    @property
    def num_steps(self) -> int:
        """Steps in the rollout (0 for an empty one)."""
        return int(self.rewards.shape[0])

    @property
    def num_envs(self) -> int:
        """Rows of the env."""
        return int(self.rewards.shape[1])


_OWNER = "DifferentiableCollector"


@final
class DifferentiableCollector:
    """Turns a differentiable vector env and a policy into graph-preserving rollouts.

    Implements :class:`~typedrl.protocols.Collector` for
    :class:`~typedrl.protocols.DifferentiablePolicy` policies. Each
    :meth:`collect` steps the env ``num_steps`` times with gradients on:
    ``policy.act(obs)`` (the policy normalises its input itself), optional
    clipping of the action to the action space's bounds, the action adjoint
    clipper (when enabled), then ``env.step(action)``. The rollout's actions,
    rewards, entropies and observations keep their graph, so one backward of
    an objective built from them reaches the policy's parameters through the
    env's dynamics. The policy's train/eval mode is never changed.

    The collector keeps the current observation between calls, so rollouts
    continue the same episodes and, until :meth:`detach_state`, the same
    graph: call :meth:`detach_state` at a truncated-backpropagation boundary
    (after the backward of a segment), or :meth:`reset` to start complete
    rollouts afresh. Episode returns and lengths are tracked from the detached
    rewards, with no host synchronisation per step.

    An env that breaks its contract mid-rollout (no ``final_obs``) raises
    :class:`~typedrl.errors.EnvContractError` naming the step; an exception of
    the env's own becomes :class:`~typedrl.errors.EnvError` naming the
    iteration and the step, with the env's exception chained.

    Args:
        env: A :class:`~typedrl.protocols.DifferentiableVecEnv` that provides
            terminal observations.
        clip_actions: Clamp each action to the action space's bounds
            (:func:`torch.clamp`) before the env sees it. A clamped coordinate
            gets zero gradient, so a policy pushing against a bound stops
            learning there: prefer a squashing policy (``tanh``), whose
            actions lie inside the bounds by construction.
        adjoint_max_norm: Rescale each row's gradient with respect to its
            action to at most this norm in the backward pass, zeroing rows
            with a non-finite gradient (see
            :class:`~typedrl.apg.ActionAdjointClipper`); ``None``
            leaves the gradient as it is.
        measure_adjoint: Measure the action adjoint (row norms, non-finite
            rows) even when it is not clipped; each rollout then carries its
            own clipper in :attr:`DifferentiableRollout.adjoint`.
        observation_limit: Cut a row at the step where its observation
            (``final_obs``) turns non-finite or exceeds this in absolute value
            (SHAC's ``observation_limit``; ``None``: never). The cut step's
            reward is stored as 0. From the next step until the env ends the
            row's episode, the row is masked: the policy acts on zeros, the
            steps are invalid (``valid`` False), their rewards and terminal
            observations are stored as zeros and the env's action carries no
            gradient. In the backward pass the row's action gradient is zeroed
            at every step of the rollout up to its cut, so the NaN inside the
            env never reaches the policy. The mask survives
            :meth:`detach_state` and checkpoints; :meth:`reset` clears it.
        record_contacts: Read the env's contact-force norm after each step
            (:class:`~typedrl.protocols.SupportsContactForces`) into
            :attr:`DifferentiableRollout.contact_norms` (AHAC's horizon reads them).

    Raises:
        ConfigError: ``env`` is not a differentiable env, provides no terminal
            observations, ``clip_actions`` is set for a space without bounds, or
            ``record_contacts`` for an env without contact forces.

    Example:
        >>> import torch
        >>> from typedrl.testing import LinearDifferentiablePolicy, QuadraticEnv
        >>> env = QuadraticEnv(num_envs=4, horizon=3)
        >>> policy = LinearDifferentiablePolicy(obs_dim=1, act_dim=1)
        >>> collector = DifferentiableCollector(env)
        >>> collector.reset(seed=0)
        >>> rollout = collector.collect(policy, num_steps=5)
        >>> rollout.rewards.sum().backward()
        >>> rollout.rewards.shape, policy.linear.weight.grad is not None
        (torch.Size([5, 4]), True)
        >>> rollout.alive_mask[:, 0].tolist()
        [True, True, True, False, False]
        >>> next_obs = collector.detach_state()  # a truncated-backpropagation boundary
    """

    def __init__(
        self,
        env: DifferentiableVecEnv,
        *,
        clip_actions: bool = False,
        adjoint_max_norm: float | None = None,
        measure_adjoint: bool = True,
        observation_limit: float | None = None,
        record_contacts: bool = False,
    ) -> None:
        if not isinstance(env, DifferentiableVecEnv):
            raise ConfigError(
                f"{_OWNER} needs a typedrl DifferentiableVecEnv (a VecEnv whose step keeps the "
                f"autograd graph, with detach_state), got {type(env).__name__}"
            )
        if adjoint_max_norm is not None:
            adjoint_max_norm = _validation.positive_float(
                _OWNER, "adjoint_max_norm", adjoint_max_norm
            )
        if observation_limit is not None:
            observation_limit = _validation.positive_float(
                _OWNER, "observation_limit", observation_limit
            )
        if record_contacts and not isinstance(env, SupportsContactForces):
            raise ConfigError(
                f"{_OWNER}.record_contacts needs an env with the SupportsContactForces "
                f"capability (contact_force_norm()), got {type(env).__name__}"
            )
        if not env.provides_final_obs:
            raise ConfigError(
                f"{_OWNER} needs an env that provides terminal observations, but "
                f"{type(env).__name__} reports provides_final_obs=False"
            )
        space = env.single_action_space
        self._bounds: tuple[Tensor, Tensor] | None = None
        if clip_actions:
            if not isinstance(space, gym.spaces.Box):
                raise ConfigError(
                    f"{_OWNER}.clip_actions needs a Box action space (with bounds), got {space!r}"
                )
            self._bounds = (
                torch.as_tensor(space.low, device=env.device),
                torch.as_tensor(space.high, device=env.device),
            )
        self.env = env
        self.device = env.device
        self.clip_actions = clip_actions
        self.adjoint_max_norm = adjoint_max_norm
        self.measure_adjoint = measure_adjoint
        self.observation_limit = observation_limit
        self.record_contacts = record_contacts
        # Checked above: the env measures its contacts.
        self._contact_source = cast("SupportsContactForces", env) if record_contacts else None
        self.episodes = EpisodeTracker(num_envs=env.num_envs, device=self.device)
        # Rows cut for an exploded observation and not yet reset by the env.
        self._masked = torch.zeros(env.num_envs, dtype=torch.bool, device=self.device)
        self._check_action = ActionChecker(
            num_envs=env.num_envs,
            space=space,
            device=self.device,
            where=f"{_OWNER}.collect: the policy's 'action'",
        )
        self._obs: Obs | None = None
        self._check_dtypes = FirstObsDtypeCheck(env)
        # The last policy whose first action passed the check.
        self._checked_policy: object = None

    @property
    def needs_reset(self) -> bool:
        """Whether the env must be reset before the next :meth:`collect` (no current observation).

        True before the first :meth:`reset`, and after loading a state that
        holds no env state (an env without ``state_dict``).
        """
        return self._obs is None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Reset the env (seeded, with the env's reset ``options``); new episodes on every row."""
        obs, _ = self.env.reset(seed=seed, options=options)
        self._check_dtypes(obs, "reset")
        self._obs = obs
        self._masked = torch.zeros_like(self._masked)
        self.episodes.restart()

    def detach_state(self) -> Obs:
        """Cut the graph at the current state (``env.detach_state()``); return the observation.

        Nothing is reset or resampled: the returned, graph-free observation has
        the same values and becomes the one the next :meth:`collect` starts from.

        Raises:
            ConfigError: The env was not reset yet.
        """
        self._require_obs()
        obs = self.env.detach_state()
        self._obs = obs
        return obs

    def _require_obs(self) -> Obs:
        if self._obs is None:
            raise ConfigError(f"{_OWNER}: call reset() before collecting")
        return self._obs

    def collect(  # noqa: PLR0915 - one loop over the steps, read top to bottom
        self,
        policy: DifferentiablePolicy,
        *,
        num_steps: int,
        deterministic: bool = False,
        iteration: int = 0,
    ) -> DifferentiableRollout:
        """Step the env ``num_steps`` times with ``policy``; return the graph-preserving rollout.

        Args:
            policy: A policy with ``reparameterized == True``; its mode is left as it is.
            num_steps: Steps to take (0 gives an empty rollout, shaped
                ``[0, num_envs, ...]``).
            deterministic: Passed to ``policy.act`` (the mean action instead of
                a reparameterised sample).
            iteration: The trainer's iteration, named in error messages.

        Raises:
            ConfigError: The policy is not reparameterised, ``num_steps`` is not
                a non-negative int, or no reset yet.
            SpecError: The policy returned no ``"action"``, an entropy of the
                wrong shape or dtype, or a first action (the first this collector
                sees from ``policy``) of the wrong shape, dtype or device (the step
                is named; the env checks every later action itself).
            EnvContractError: The env returned no ``final_obs`` (the step is named).
            EnvError: The env raised an exception of its own (chained).
        """
        if type(num_steps) is not int or num_steps < 0:
            non_negative_int(f"{_OWNER}.collect", "num_steps", num_steps)
        _check_policy(policy)
        start = obs = self._require_obs()
        env = self.env
        adjoint = self._new_adjoint()
        observations: list[Obs] = []
        actions: list[Tensor] = []
        rewards: list[Tensor] = []
        entropies: list[Tensor] = []
        terminated: list[Tensor] = []
        truncated: list[Tensor] = []
        valid: list[Tensor] = []
        finals: list[Obs] = []
        contacts: list[Tensor] = []
        contact_source = self._contact_source
        limit = self.observation_limit
        cuts = RolloutCuts(self._masked, limit=limit) if limit is not None else None
        for t in range(num_steps):
            if cuts is not None:
                # A masked row's observation is garbage (often NaN): the policy sees zeros.
                obs = cuts.observation(obs)
            outputs = policy.act(obs, deterministic=deterministic)
            action = self._action_of(outputs, t, policy)
            if self._bounds is not None:
                low, high = self._bounds
                action = torch.clamp(action, low.to(action.dtype), high.to(action.dtype))
            # Only the gradient that comes back through the env passes the clipper.
            env_action = (
                adjoint.attach(action) if adjoint is not None and action.requires_grad else action
            )
            if cuts is not None:
                # Outside the clipper, so that it never sees (nor counts) a cut row's NaN.
                env_action = cuts.action(env_action, t)
            result = step_env(env, env_action, step=t, iteration=iteration)
            final_obs = result.final_obs
            if final_obs is None:
                raise EnvContractError(
                    f"{type(env).__name__} reports provides_final_obs=True but returned "
                    f"final_obs=None at step {t} of iteration {iteration}; a differentiable "
                    "env must return the terminal observations"
                )
            reward, step_valid, final_obs = (
                cuts.step(result, final_obs)
                if cuts is not None
                else (result.reward, result.valid, final_obs)
            )
            observations.append(obs)
            actions.append(action)
            rewards.append(reward)
            entropies.append(_entropy_of(outputs, reward, t))
            terminated.append(result.terminated)
            truncated.append(result.truncated)
            valid.append(step_valid)
            finals.append(final_obs)
            if contact_source is not None:
                contacts.append(contact_source.contact_force_norm().detach())
            obs = result.obs
        # Outside the loop: the last step's observation has the step's dtypes (checked
        # until one step passed, once in a run).
        check = self._check_dtypes
        self._obs = obs if check.done else check(obs, "step" if num_steps else "reset")
        if num_steps == 0:
            return self._empty_rollout(start, adjoint)
        if cuts is not None:
            self._masked = cuts.close()
        reward = torch.stack(rewards)
        done_terminated, done_truncated = torch.stack(terminated), torch.stack(truncated)
        step_valid = torch.stack(valid)
        done = done_terminated | done_truncated
        return DifferentiableRollout(
            initial_observation=start,
            observations=tensordict.stack(observations),
            actions=torch.stack(actions),
            rewards=reward,
            entropies=torch.stack(entropies),
            terminated=done_terminated,
            truncated=done_truncated,
            valid=step_valid,
            alive_mask=first_done_mask(done),
            terminal_observations=tensordict.stack(finals),
            final_observation=obs,
            episodes=self.episodes.update(reward.detach(), done, step_valid),
            adjoint=adjoint,
            contact_norms=torch.stack(contacts) if contacts else None,
        )

    def _new_adjoint(self) -> ActionAdjointClipper | None:
        """A fresh clipper per rollout, so each rollout's statistics cover its own backward."""
        if self.adjoint_max_norm is None and not self.measure_adjoint:
            return None
        return ActionAdjointClipper(max_norm=self.adjoint_max_norm, device=self.device)

    def _action_of(self, outputs: object, step: int, policy: object) -> Tensor:
        action = outputs.get("action", None) if isinstance(outputs, TensorDict) else None
        if action is None:
            keys = sorted(outputs.keys()) if isinstance(outputs, TensorDict) else None
            raise SpecError(
                f"{_OWNER}.collect: expected policy.act() to return a TensorDict holding "
                f"'action', got {describe(outputs) if keys is None else f'keys {keys}'} at "
                f"step {step}"
            )
        if self._checked_policy is not policy:
            # The first action of each policy the collector sees (shape, dtype, device): its
            # later steps run the same code, and the env checks every action it is given.
            self._check_action(action)
            self._checked_policy = policy
        return cast("Tensor", action)

    def _empty_rollout(
        self, start: Obs, adjoint: ActionAdjointClipper | None
    ) -> DifferentiableRollout:
        """A rollout of no step, shaped ``[0, num_envs, ...]`` throughout."""
        rows, device = self.env.num_envs, self.device
        space = self.env.single_action_space
        float_dtype = (
            _torch_dtype(space.dtype)
            if isinstance(space, gym.spaces.Box)
            else torch.get_default_dtype()
        )
        no_obs = start.detach().unsqueeze(0)[:0].clone()
        flags = torch.zeros(0, rows, dtype=torch.bool, device=device)
        scalars = torch.zeros(0, rows, dtype=float_dtype, device=device)
        tracker = self.episodes
        episodes = EpochEpisodes(
            returns=torch.zeros(0, rows, dtype=torch.float64, device=device),
            lengths=torch.zeros(0, rows, dtype=torch.int64, device=device),
            ended=flags,
            return_so_far=tracker.return_so_far,
            length_so_far=tracker.length_so_far,
        )
        return DifferentiableRollout(
            initial_observation=start,
            observations=no_obs,
            actions=torch.zeros(
                (0, rows, *(space.shape or ())),
                dtype=action_dtype_for(space, float_dtype),
                device=device,
            ),
            rewards=scalars,
            entropies=scalars.clone(),
            terminated=flags,
            truncated=flags.clone(),
            valid=flags.clone(),
            alive_mask=flags.clone(),
            terminal_observations=no_obs.clone(),
            final_observation=start,
            episodes=episodes,
            adjoint=adjoint,
        )

    # ------------------------------------------------------------------ state

    def state_dict(self) -> dict[str, Any]:
        """The env's state, the current observation and the running episodes' statistics.

        Empty when the env is not checkpointable (no ``state_dict``): a resumed
        run then restarts the env (:attr:`needs_reset`). The observation is
        stored without its graph, next to the rows masked after a cut.
        """
        state = collector_state_dict(self.env, self._obs, self.episodes)
        if state:
            state["masked_rows"] = self._masked.clone()
        return state

    def load_state_dict(self, state_dict: dict[str, Any], /) -> None:
        """Restore :meth:`state_dict`'s output; an empty dict asks for a fresh reset.

        Raises:
            CheckpointError: The state holds env state for an env that is not
                checkpointable, lacks a piece (the key is named), or was saved
                with another ``num_envs`` (``masked_rows`` included).
        """
        self._obs = load_collector_state(self.env, state_dict, self.episodes)
        # A state saved before masking existed has no rows masked.
        masked = state_dict.get("masked_rows", torch.zeros_like(self._masked))
        rows = self.env.num_envs
        if not isinstance(masked, Tensor) or tuple(masked.shape) != (rows,):
            raise CheckpointError(
                f"the collector state's 'masked_rows' must be a tensor of shape [{rows}] (one "
                f"entry per env row), got {describe(masked)}; was it saved with another num_envs?"
            )
        self._masked = masked.to(device=self.device, dtype=torch.bool)

    def __repr__(self) -> str:
        return (
            f"{_OWNER}(env={type(self.env).__name__}, clip_actions={self.clip_actions}, "
            f"adjoint_max_norm={self.adjoint_max_norm}, measure_adjoint={self.measure_adjoint}, "
            f"observation_limit={self.observation_limit})"
        )


def _check_policy(policy: object) -> None:
    """Refuse a policy whose actions do not keep the graph to its parameters."""
    reparameterized = getattr(policy, "reparameterized", None)
    if reparameterized is True and callable(getattr(policy, "act", None)):
        return
    raise ConfigError(
        f"{_OWNER}.collect needs a DifferentiablePolicy whose act() keeps the graph from its "
        f"parameters to 'action' (reparameterized=True), got {type(policy).__name__} with "
        f"reparameterized={reparameterized!r}; sample with the reparameterisation trick "
        "(mean + std * noise), or act deterministically"
    )


def _entropy_of(outputs: TensorDict, reward: Tensor, step: int) -> Tensor:
    """The policy's ``"entropy"`` output ``[num_envs]``, or zeros shaped like the reward."""
    entropy = outputs.get("entropy", None)
    if entropy is None:
        return torch.zeros_like(reward, requires_grad=False)
    if (
        not isinstance(entropy, Tensor)
        or entropy.shape != reward.shape
        or not entropy.is_floating_point()
    ):
        raise SpecError(
            f"{_OWNER}.collect: the policy's 'entropy' must be a floating-point tensor "
            f"[{reward.shape[0]}] (num_envs), got {describe(entropy)} at step {step}"
        )
    return entropy


def _torch_dtype(dtype: np.dtype[Any] | None) -> torch.dtype:
    """The torch dtype of a NumPy dtype (``float32`` when the space has none)."""
    if dtype is None:
        return torch.float32
    return torch.from_numpy(np.empty(0, dtype=dtype)).dtype
