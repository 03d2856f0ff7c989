"""The typed contracts of typedrl.

Users implement these structurally: any class with the right members satisfies
them, no inheritance needed. All are ``runtime_checkable``, so ``isinstance``
checks that the members exist (not their signatures; ``mypy --strict`` checks
those statically).

The vector-env contract
-----------------------

- **Observations** are a :class:`~tensordict.TensorDict` with
  ``batch_size == [num_envs]`` on ``env.device``. A single-array observation
  lives under the key ``"obs"``; multi-group envs keep their group names
  (``"policy"``, ``"critic"``).
- **Actions** are one tensor ``[num_envs, *single_action_space.shape]`` on
  ``env.device``: floating point for ``Box`` spaces, ``int64`` for ``Discrete``
  (shape ``[num_envs]``) and ``MultiDiscrete`` spaces.
- **step** returns a :class:`~typedrl.protocols.StepResult`, which unpacks as
  Gymnasium's ``(obs, reward, terminated, truncated, info)``: reward float
  ``[num_envs]``, terminated and truncated ``torch.bool`` ``[num_envs]``, all on
  ``env.device``.
- **Autoreset is same-step**: when row ``i`` ends (``terminated[i] or
  truncated[i]``), ``obs[i]`` is already the first observation of its next
  episode, and ``result.final_obs[i]`` is the terminal observation, so a
  truncated episode can be bootstrapped exactly from ``V(final_obs[i])``.
- An env that cannot provide terminal observations says so with
  ``provides_final_obs = False`` and returns ``final_obs=None``; consumers then
  use their documented approximation and never substitute silently.
- A row whose transition is not real (a *ghost* step, in which a next-step
  autoreset env performed a reset instead of a transition) has
  ``result.valid[i] == False``; collectors and buffers never train on it.
"""

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar, final, runtime_checkable

import gymnasium as gym
import torch
from jaxtyping import Bool, Float, Shaped
from tensordict import TensorDict
from torch import Tensor, nn

from typedrl._results import DifferentiableRolloutSpec, EvaluationResult, StepResult
from typedrl.types import (
    Action,
    BatchAction,
    BatchScalar,
    EnvScalar,
    Obs,
    ObsMask,
)

if TYPE_CHECKING:
    from typedrl.distributed import Distributed

__all__ = [
    "ActorCritic",
    "Collector",
    "DifferentiablePolicy",
    "DifferentiableRolloutSpec",
    "DifferentiableVecEnv",
    "EvaluationResult",
    "Evaluator",
    "Policy",
    "ScheduledDifferentiableVecEnv",
    "StateSpec",
    "StatefulActorCritic",
    "StepResult",
    "SupportsContactForces",
    "SupportsDeterministicActor",
    "SupportsNormalizerUpdate",
    "SupportsObservationNormalizeMask",
    "SupportsStateDict",
    "TensorActorCritic",
    "VecEnv",
]

PolicyT_contra = TypeVar("PolicyT_contra", contravariant=True)
DataT_co = TypeVar("DataT_co", covariant=True)


@runtime_checkable
class VecEnv(Protocol):
    """A batch of ``num_envs`` environments stepped together, torch-native.

    See the module docstring for the full contract (observation layout,
    same-step autoreset, terminal observations, ghost transitions).
    """

    @property
    def num_envs(self) -> int:
        """Number of rows (sub-environments); fixed for the env's lifetime."""
        ...

    @property
    def device(self) -> torch.device:
        """Device of every tensor the env returns and of the actions it accepts."""
        ...

    @property
    def single_observation_space(self) -> gym.Space[Any]:
        """Gymnasium space of one row's observation (a ``Dict`` for multi-key observations)."""
        ...

    @property
    def single_action_space(self) -> gym.Space[Any]:
        """Gymnasium space of one row's action."""
        ...

    @property
    def provides_final_obs(self) -> bool:
        """Whether :attr:`StepResult.final_obs` holds exact terminal observations."""
        ...

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        """Reset every row.

        Args:
            seed: Seeds the env's random generators; the same seed reproduces the
                same run exactly. ``None`` keeps the current generator state.
            options: Env-specific reset options.

        Returns:
            The first observation (``batch_size == [num_envs]``) and an info dict.
        """
        ...

    def step(self, action: Action) -> StepResult:
        """Advance every row by one step with same-step autoreset.

        Args:
            action: ``[num_envs, *single_action_space.shape]`` on :attr:`device`.

        Returns:
            The step result; see the module docstring for the autoreset rules.
        """
        ...

    def close(self) -> None:
        """Release the env's resources; calling it twice is harmless."""
        ...


@runtime_checkable
class DifferentiableVecEnv(VecEnv, Protocol):
    """A :class:`VecEnv` whose ``step`` is differentiable.

    Rules, on top of the :class:`VecEnv` contract:

    - ``step`` keeps the autograd path from ``action`` to ``reward``, to the next
      observation and to the env's internal state.
    - Rows that end are reset inside ``step``: their new initial state carries no
      graph history, while the terminal reward and ``final_obs`` keep their
      gradient.
    - :meth:`detach_state` cuts the graph at a truncated-backpropagation
      boundary without resetting or resampling anything.
    """

    def detach_state(self) -> Obs:
        """Detach the internal state from the autograd graph and return the current observation.

        The returned observation equals the last one returned by ``step`` or
        ``reset`` value for value, but carries no graph.
        """
        ...


@runtime_checkable
class SupportsObservationNormalizeMask(Protocol):
    """Optional capability of a differentiable env: which features to normalise.

    An APG trainer that normalises observations leaves features whose flag is
    ``False`` untouched (one-hot codes, phases, already-normalised values).
    """

    @property
    def observation_normalize_mask(self) -> ObsMask:
        """``torch.bool`` ``[obs_dim]``; ``True`` where the feature may be normalised."""
        ...


@runtime_checkable
class SupportsContactForces(Protocol):
    """Optional capability of a differentiable env: how hard each row pressed on its contacts.

    AHAC (:class:`~typedrl.ahac.AHAC`) adapts its window to it: the window
    shortens where the contact forces grow stiff. The collector reads it right
    after each step.
    """

    def contact_force_norm(self) -> EnvScalar:
        """The norm of each row's contact forces in its last step (``[num_envs]``, detached).

        A row reset inside that step reports the step that ended its episode.
        """
        ...


@runtime_checkable
class ScheduledDifferentiableVecEnv(DifferentiableVecEnv, Protocol):
    """A differentiable env that plans each complete rollout itself (curricula)."""

    def prepare_differentiable_rollout(self, rollout_index: int) -> DifferentiableRolloutSpec:
        """Choose the next complete rollout's difficulty and horizon.

        Called just before the reset that starts complete rollout number
        ``rollout_index`` (counted from 0 over the whole run).

        Returns:
            The rollout's frozen spec: its full horizon, objective scale and
            metadata for logging.
        """
        ...


@runtime_checkable
class Policy(Protocol):
    """Maps observations to actions; an :class:`torch.nn.Module` in practice."""

    training: bool
    """Train/eval mode flag, as on :class:`torch.nn.Module`."""

    def train(self, mode: bool = True) -> object:
        """Set train (``True``) or eval (``False``) mode (modules return ``self``)."""
        ...

    def act(self, obs: Obs, *, deterministic: bool = False) -> Obs:
        """Choose actions for a batch of observations.

        Args:
            obs: Observation TensorDict with ``batch_size == [batch]``.
            deterministic: Return the distribution's mode instead of a sample.

        Returns:
            A TensorDict with ``batch_size == [batch]`` holding at least
            ``"action"`` (``[batch, *action_shape]``); policy families add
            ``"log_prob"``, ``"value"`` and ``"entropy"`` (each float ``[batch]``)
            where they need them.
        """
        ...


@runtime_checkable
class ActorCritic(Policy, Protocol):
    """A stochastic policy with a value head, as PPO needs it.

    This is all :class:`~typedrl.ppo.PPOAgent` requires of ``policy=``.
    Optional capabilities it uses when a policy has them:
    :class:`TensorActorCritic` (a faster collection and update),
    :class:`SupportsNormalizerUpdate` (observation statistics inside the
    policy) and :class:`SupportsDeterministicActor` (its own export module).
    """

    def evaluate(self, obs: Obs, action: BatchAction) -> Obs:
        """Score given actions under the current policy.

        Returns:
            A TensorDict with ``batch_size == [batch]`` holding ``"log_prob"``,
            ``"entropy"`` and ``"value"``, each float ``[batch]``, with gradients.
        """
        ...

    def value(self, obs: Obs) -> EnvScalar:
        """State value ``V(obs)``, float ``[batch]`` (used to bootstrap truncations)."""
        ...


@runtime_checkable
class TensorActorCritic(ActorCritic, Protocol):
    """Optional fast path of an actor-critic: ``act`` and ``evaluate`` as plain tuples.

    PPO's collector and update call these instead of :meth:`~Policy.act`
    and :meth:`~ActorCritic.evaluate` when a policy has them (an ``isinstance``
    check against this protocol), which skips building a TensorDict per step
    and per minibatch: for the few rows of a small vector env that costs more
    than the arithmetic. Both must agree with the TensorDict methods.
    """

    def act_tensors(
        self, obs: Obs, *, deterministic: bool = False
    ) -> tuple[BatchAction, BatchScalar, BatchScalar]:
        """:meth:`~Policy.act`'s ``(action, log_prob, value)``, without the entropy."""
        ...

    def evaluate_tensors(
        self, obs: Obs, action: BatchAction
    ) -> tuple[BatchScalar, BatchScalar, BatchScalar]:
        """:meth:`~ActorCritic.evaluate`'s ``(log_prob, entropy, value)``, with gradients."""
        ...


@final
class StateSpec(NamedTuple):
    """Per-row shape and dtype of one entry of a recurrent policy's rollout state."""

    shape: tuple[int, ...]
    """Shape of one row's entry (``(hidden,)`` for a GRU, ``(layers, hidden)`` for stacks)."""

    dtype: torch.dtype
    """The entry's dtype."""


@runtime_checkable
class StatefulActorCritic(ActorCritic, Protocol):
    """An actor-critic with a rollout state (a GRU's or an LSTM's hidden state).

    The state is a TensorDict with ``batch_size == [batch]`` whose keys are
    those of :attr:`state_specs`. Trainers and evaluators hold it between
    steps, reset the rows whose episode ended (terminated or truncated) to
    :meth:`initial_state`, and checkpoint it. The stateless
    :class:`ActorCritic` methods (``act``, ``evaluate``, ``value``) read each
    observation as the first of an episode (from the initial state); ``act``
    also returns the next state under ``"state"``, so that one setup forward
    shows the state's keys, shapes and dtypes, which are checked against
    :attr:`state_specs`.

    Step ``t`` reads the state before ``obs_t`` and returns the state after
    it; the policy's outputs at step ``t`` are read from the state after it.
    """

    @property
    def state_specs(self) -> Mapping[str, StateSpec]:
        """Every state key with its per-row shape and dtype."""
        ...

    def initial_state(self, num_rows: int, *, device: torch.device) -> TensorDict:
        """The state of ``num_rows`` rows at an episode's start, ``batch_size == [num_rows]``."""
        ...

    def act_step(self, obs: Obs, state: TensorDict, *, deterministic: bool = False) -> Obs:
        """One step from ``state``: ``act``'s outputs plus the next state under ``"state"``.

        Returns:
            A TensorDict with ``"action"``, ``"log_prob"``, ``"value"``,
            ``"entropy"`` and ``"state"`` (nested, the state after ``obs``).
        """
        ...

    def value_step(self, obs: Obs, state: TensorDict) -> EnvScalar:
        """``V(obs)`` from ``state`` (bootstraps a truncation from its terminal observation)."""
        ...

    def evaluate_sequence(
        self,
        obs: Obs,
        action: Shaped[Tensor, "num_steps batch *action_shape"],
        state: TensorDict,
        done: Bool[Tensor, "num_steps batch"],
    ) -> tuple[
        Float[Tensor, "num_steps batch"],
        Float[Tensor, "num_steps batch"],
        Float[Tensor, "num_steps batch"],
    ]:
        """Score a rollout again from its start state, with gradients (truncated BPTT).

        Args:
            obs: ``batch_size == [num_steps, batch]``, time-major.
            action: ``[num_steps, batch, *action_shape]``.
            state: The state before ``obs[0]``, ``batch_size == [batch]``.
            done: ``torch.bool`` ``[num_steps, batch]``: the row's episode ended
                at that step, so its state is reset to the initial state after it.

        Returns:
            ``(log_prob, entropy, value)``, each float ``[num_steps, batch]``.
        """
        ...


@runtime_checkable
class SupportsNormalizerUpdate(Protocol):
    """Optional capability of a policy: observation statistics held inside it.

    Trainers call :meth:`update_normalizers` on every rank after each applied
    update, with the observations the update used, so that every forward of
    one update saw the same normalisation. A policy without it is never asked.
    """

    def update_normalizers(
        self, obs: Obs, *, dist: "Distributed", mask: Tensor | None = None
    ) -> None:
        """Merge a batch of observations into the running statistics (all ranks call it).

        Args:
            obs: Observations with ``batch_size == [batch]``.
            dist: The ranks whose statistics are pooled (identical afterwards).
            mask: ``torch.bool`` ``[batch]``; ``False`` rows are left out.
        """
        ...


@runtime_checkable
class SupportsDeterministicActor(Protocol):
    """Optional capability of a policy: its own exportable deterministic actor.

    :class:`~typedrl.export.DeterministicPolicy` uses it when a policy has it;
    any other policy is exported through its ``act(obs, deterministic=True)``.
    """

    def deterministic_actor(self, observation_space: gym.Space[Any]) -> nn.Module:
        """A copy of the policy's deterministic action as a flat-tensor module.

        The module maps ``[batch, obs_dim]`` float observations (the policy's
        observation keys, each flattened, concatenated in the policy's order) to
        ``[batch, *action_shape]`` actions, made of tensor operations only so
        that it traces and exports; it has an ``int`` attribute ``obs_dim``.
        Later changes to the policy do not reach it.
        """
        ...


@runtime_checkable
class DifferentiablePolicy(Policy, Protocol):
    """A policy whose actions carry the autograd path to its parameters.

    Stochastic differentiable policies sample with the reparameterisation trick
    (``action = mean + std * noise``), so the analytic policy gradient flows
    through the sample.
    """

    @property
    def reparameterized(self) -> bool:
        """``True`` when ``act`` keeps the graph from the parameters to ``"action"``.

        Trainers that backpropagate through the env refuse a policy that
        reports ``False``.
        """
        ...


@runtime_checkable
class Collector(Protocol[PolicyT_contra, DataT_co]):
    """Turns an env and a policy into training data.

    The on-policy collector fills an experience buffer; the differentiable
    collector returns a graph-preserving rollout. A collector keeps the env's
    current observation between calls, so consecutive calls continue the same
    episodes.
    """

    def collect(self, policy: PolicyT_contra, *, num_steps: int) -> DataT_co:
        """Step the env ``num_steps`` times with ``policy`` and return the data."""
        ...


@runtime_checkable
class Evaluator(Protocol):
    """Scores a policy without touching training state.

    Contract: deterministic actions; exactly N completed episodes from fixed,
    seeded starts (the same starts at every evaluation); episodes counted
    without favouring low-index envs; the policy's train/eval mode restored
    afterwards; no effect on training envs, buffers or optimizers.
    """

    def evaluate(self, policy: Policy) -> EvaluationResult:
        """Run the evaluation and return its metrics and score."""
        ...


@runtime_checkable
class SupportsStateDict(Protocol):
    """Anything checkpointable: modules, optimizers, schedulers, normalisers, counters."""

    def state_dict(self) -> dict[str, Any]:
        """Return the object's state as a dict of tensors and plain values."""
        ...

    def load_state_dict(self, state_dict: dict[str, Any], /) -> object:
        """Restore the state returned by :meth:`state_dict`."""
        ...
