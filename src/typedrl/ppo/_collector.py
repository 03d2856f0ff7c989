"""The on-policy collector: steps a vector env with an actor-critic into an experience buffer."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast, final

import torch
from jaxtyping import Bool, Float
from tensordict import TensorDict
from torch import Tensor

from typedrl._collector_state import collector_state_dict, load_collector_state
from typedrl._results import StepResult, step_env
from typedrl.buffers import ExperienceBuffer
from typedrl.distributed import Distributed, SingleProcess, raise_together
from typedrl.envs._checker._observations import check_obs_dtypes
from typedrl.episodes import EpisodeTracker, EpochEpisodes
from typedrl.errors import ConfigError, EnvContractError, NonFiniteError, SpecError, TypedRLError
from typedrl.protocols import ActorCritic, StatefulActorCritic, TensorActorCritic, VecEnv
from typedrl.types import Obs

__all__ = ["STATE_KEY", "OnPolicyCollector", "OnPolicyRollout", "episode_boundary"]

OBS_KEY = "obs"
"""Prefix of the observation's keys in the buffer."""
STATE_KEY = "state"
"""Prefix of a recurrent policy's rollout state in the buffer (the state each step read)."""
_STEP_KEYS = ("action", "log_prob", "value")
_POLICY_STATE = "policy_state"
"""The key of a recurrent policy's rollout state in :meth:`OnPolicyCollector.state_dict`."""


def episode_boundary(
    terminated: Bool[Tensor, "*rows"],
    truncated: Bool[Tensor, "*rows"],
    valid: Bool[Tensor, "*rows"],
) -> Bool[Tensor, "*rows"]:
    """Rows whose rollout state restarts after this step: the episode ended, or a ghost step.

    A ghost step (``valid == False``) returned the first observation of a new
    episode, which must be read from the initial state.
    """
    return terminated | truncated | ~valid


@final
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class OnPolicyRollout:
    """What :meth:`OnPolicyCollector.collect` returns: one epoch of experience.

    ``data`` is the buffer's stacked TensorDict, ``batch_size == [num_steps,
    num_envs]``, holding ``"obs"`` (the observation each step acted on, nested
    by the env's keys), ``"action"``, ``"log_prob"``, ``"value"`` (``V(obs_t)``),
    ``"reward"`` (float32), ``"terminated"``, ``"truncated"``, ``"valid"`` and
    ``"final_value"`` (``V(final_obs_t)`` where :attr:`has_final_value`, else
    ``V(obs_t)``). With a :class:`~typedrl.protocols.StatefulActorCritic`
    it also holds ``"state"``, the rollout state each step read (step 0's is
    the state at the rollout's start). It is a view of the collector's buffer:
    the next :meth:`~OnPolicyCollector.collect` overwrites it.
    """

    data: TensorDict
    """The epoch's transitions, ``[num_steps, num_envs]``."""
    last_value: Float[Tensor, " num_envs"]
    """``V(obs_T)``: the value of the observation after the last step (float32)."""
    has_final_value: Bool[Tensor, " num_steps"]
    """Steps whose ``final_value`` holds ``V(final_obs)`` (an exact bootstrap of truncations)."""
    approximate_bootstrap: bool
    """The env provides no terminal observations: ``final_value`` is ``V(obs_t)``, the value
    of the last observation before a time-out (rsl_rl's approximation)."""
    episodes: EpochEpisodes
    """Returns and lengths of the episodes that ended during the epoch."""


@final
class OnPolicyCollector:
    """Turns a vector env and an actor-critic into epochs of on-policy experience.

    Implements :class:`~typedrl.protocols.Collector` for
    :class:`~typedrl.protocols.ActorCritic` policies. Each :meth:`collect`
    steps the env ``num_steps`` times without gradients, in the policy's eval
    mode (restored afterwards), writing every step into an
    :class:`~typedrl.buffers.ExperienceBuffer`; keeps the current observation
    between calls so that epochs continue the same episodes; evaluates
    ``V(final_obs)`` on steps where a row was truncated (an exact bootstrap);
    tracks episode returns and lengths without a host sync per step; checks
    the first observation's dtypes against the observation space
    (:class:`~typedrl.errors.EnvContractError` naming the key), the buffer then
    holding every step to them; and checks once per epoch that observations,
    terminal observations, rewards and policy outputs are finite, raising
    :class:`~typedrl.errors.NonFiniteError` that names the kind, the key, the
    row and the step before anything is trained.

    A :class:`~typedrl.protocols.StatefulActorCritic` policy's rollout state
    is held between steps and epochs: each step reads it and returns the
    next one, rows that end (terminated, truncated, or a ghost step) restart
    from the policy's initial state after the step (a ``torch.where``, no host
    read), and the state each step read is stored in the buffer under
    ``"state"``. It is part of :meth:`state_dict`, so a resumed run continues
    bit for bit.

    An env that breaks its contract mid-rollout (``provides_final_obs`` but no
    ``final_obs``) raises :class:`~typedrl.errors.EnvContractError` naming the
    step; an exception of the env's own becomes :class:`~typedrl.errors.EnvError`
    naming the iteration and the step, with the env's exception chained.

    Args:
        env: This rank's training env.
        num_steps: Steps per epoch (the buffer's length).
        dist: The ranks that check finiteness together (a bad rollout on one rank
            stops every rank); single-process by default.

    Example:
        >>> import torch
        >>> from typedrl.policies import MLPActorCritic
        >>> from typedrl.testing import CountingVecEnv
        >>> env = CountingVecEnv(num_envs=2, terminate_after=3)
        >>> policy = MLPActorCritic(env.single_observation_space, env.single_action_space)
        >>> collector = OnPolicyCollector(env, num_steps=4)
        >>> collector.reset(seed=0)
        >>> rollout = collector.collect(policy, num_steps=4)
        >>> rollout.data.batch_size, rollout.episodes.ended.sum().item()
        (torch.Size([4, 2]), 2)
    """

    def __init__(self, env: VecEnv, *, num_steps: int, dist: Distributed | None = None) -> None:
        if not isinstance(env, VecEnv):
            raise ConfigError(f"OnPolicyCollector needs a typedrl VecEnv, got {type(env).__name__}")
        self.env = env
        self.device = env.device
        self.dist: Distributed = dist if dist is not None else SingleProcess(device=env.device)
        self.buffer = ExperienceBuffer(
            num_envs=env.num_envs, num_steps=num_steps, device=env.device
        )
        self._obs: Obs | None = None
        self._state: TensorDict | None = None
        self._initial_state: TensorDict | None = None
        self._registered = False
        self.episodes = EpisodeTracker(num_envs=env.num_envs, device=self.device)

    @property
    def num_steps(self) -> int:
        """Steps per epoch."""
        return self.buffer.num_steps

    @property
    def needs_reset(self) -> bool:
        """Whether the env must be reset before the next :meth:`collect` (no current observation).

        True before the first :meth:`reset`, and after loading a state that
        holds no env state (an env without ``state_dict``).
        """
        return self._obs is None

    def reset(self, *, seed: int | None = None) -> None:
        """Reset the env (seeded) and start new episodes on every row."""
        obs, _ = self.env.reset(seed=seed)
        self._obs = obs
        self._state = None
        self.episodes.restart()

    def register(self, policy: ActorCritic) -> None:
        """Register the buffer's keys (idempotent).

        The observation's keys and dtypes (checked against the observation
        space), and every output's shape and dtype from one
        eval-mode, no-grad, deterministic forward of ``policy`` (it draws no random
        numbers, so registering never shifts a run's random streams). For a
        :class:`~typedrl.protocols.StatefulActorCritic`, the next state that
        forward returns under ``"state"`` registers the state keys, which must
        match the policy's ``state_specs``.

        Raises:
            ConfigError: The env was not reset yet.
            SpecError: The setup forward's state disagrees with ``state_specs``
                (one line naming the key, the declared and the actual shape and dtype).
        """
        if self._registered:
            return
        obs = self._require_obs()
        # The buffer takes its dtypes from this observation and holds every step to them.
        # A bad observation on one rank stops every rank (each registers once, at the start).
        failure: TypedRLError | None = None
        try:
            check_obs_dtypes(
                obs, self.env.single_observation_space, where=f"{type(self.env).__name__}.reset()"
            )
        except TypedRLError as error:
            failure = error
        raise_together(failure, "the observation check", self.dist)
        buffer = self.buffer
        buffer.register_from(obs, prefix=OBS_KEY)
        was_training = policy.training
        policy.train(mode=False)
        try:
            with torch.no_grad():
                outputs = policy.act(obs, deterministic=True)
        finally:
            policy.train(mode=was_training)
        buffer.register_from(outputs.select(*_STEP_KEYS))
        if isinstance(policy, StatefulActorCritic):
            self._register_state(policy, outputs)
        for key in ("reward", "final_value"):
            buffer.register_key(key, (), torch.float32)
        for key in ("terminated", "truncated"):
            buffer.register_key(key, (), torch.bool)
        self._registered = True

    def _register_state(self, policy: StatefulActorCritic, outputs: TensorDict) -> None:
        """Register the state keys from the setup forward; check them against the specs."""
        state = outputs.get(STATE_KEY, None)
        if not isinstance(state, TensorDict):
            raise SpecError(
                f"{type(policy).__name__}.act must return the next rollout state under "
                f"{STATE_KEY!r} (a TensorDict), got the keys {sorted(outputs.keys())}"
            )
        specs = {
            (STATE_KEY, key): (spec.shape, spec.dtype) for key, spec in policy.state_specs.items()
        }
        undeclared = [
            key
            for key in state.keys(include_nested=True, leaves_only=True)
            if (STATE_KEY, key) not in specs
        ]
        if undeclared:
            raise SpecError(
                f"{type(policy).__name__}: the setup forward returned the state key "
                f"{undeclared[0]!r}, which state_specs does not declare (declared: "
                f"{sorted(policy.state_specs)})"
            )
        self.buffer.register_from(state, prefix=STATE_KEY)
        self.buffer.check_spec(specs)

    def _require_obs(self) -> Obs:
        if self._obs is None:
            raise ConfigError("OnPolicyCollector: call reset() before collecting")
        return self._obs

    @torch.no_grad()
    def collect(
        self, policy: ActorCritic, *, num_steps: int, iteration: int = 0
    ) -> OnPolicyRollout:
        """Step the env ``num_steps`` times with ``policy``; return the epoch's experience.

        Args:
            policy: The actor-critic (its sampled actions are taken).
            num_steps: Must equal :attr:`num_steps` (the buffer's length).
            iteration: The trainer's iteration, named in error messages.

        Raises:
            ConfigError: ``num_steps`` differs from the buffer's, or no reset yet.
            EnvContractError: The env broke its contract (the step is named).
            EnvError: The env raised an exception of its own (chained).
            NonFiniteError: A NaN or infinity came from the env or the policy.

        A :class:`~typedrl.errors.TypedRLError` on one rank (a bad env output)
        raises on every rank: the others raise
        :class:`~typedrl.errors.DistributedError` with its message.
        """
        if num_steps != self.num_steps:
            raise ConfigError(
                f"OnPolicyCollector.collect: num_steps must be {self.num_steps} (the buffer's "
                f"length), got {num_steps}"
            )
        env, buffer = self.env, self.buffer
        obs = self._require_obs()
        self.register(policy)
        buffer.reset_epoch()
        was_training = policy.training
        policy.train(mode=False)
        approximate = not env.provides_final_obs
        # On the CPU, reading a flag costs no device synchronisation.
        host_reads = self.device.type == "cpu"
        # The fast path of a policy that has it: no TensorDict per step.
        act_tensors = policy.act_tensors if isinstance(policy, TensorActorCritic) else None
        stateful = policy if isinstance(policy, StatefulActorCritic) else None
        state = self._rollout_state(stateful) if stateful is not None else None
        has_final = [False] * num_steps
        final_obs_ok = torch.ones(
            num_steps, self.env.num_envs, dtype=torch.bool, device=self.device
        )
        failure: TypedRLError | None = None
        last_value: Tensor | None = None
        try:
            for t in range(num_steps):
                action, log_prob, value, next_state = self._act(
                    policy, obs, act_tensors=act_tensors, state=state, step=t
                )
                result = step_env(self.env, action, step=t, iteration=iteration)
                final_values = self._final_values(
                    policy=policy,
                    result=result,
                    value=value,
                    step=t,
                    approximate=approximate,
                    host_reads=host_reads,
                    state=next_state,
                )
                if final_values is not None and not approximate and result.final_obs is not None:
                    final_obs_ok[t] = _rows_finite(result.final_obs)
                has_final[t] = final_values is not None
                buffer.write(t, obs, prefix=OBS_KEY)
                buffer.write(
                    t,
                    {
                        "action": action,
                        "log_prob": log_prob,
                        "value": value,
                        "reward": result.reward.to(torch.float32),
                        "terminated": result.terminated,
                        "truncated": result.truncated,
                        "valid": result.valid,
                        "final_value": (
                            final_values if final_values is not None else value
                        ).float(),
                    },
                )
                obs = result.obs
                if next_state is not None:
                    # Rows that ended start their next episode from the initial state.
                    state = self._restart_ended(
                        next_state,
                        episode_boundary(result.terminated, result.truncated, result.valid),
                    )
            self._obs = obs
            self._state = state
            last_value = (
                stateful.value_step(obs, state)
                if stateful is not None and state is not None
                else policy.value(obs)
            ).float()
        except TypedRLError as error:
            failure = error
        finally:
            policy.train(mode=was_training)
        data: TensorDict | None = None
        if failure is None and last_value is not None:
            data = buffer.stacked()
            failure = self._nonfinite(data, obs, final_obs_ok, last_value, iteration)
        # One collective per epoch, on every rank alike: an env's failure or a non-finite
        # value on one rank stops every rank, with its message, instead of a hang.
        raise_together(failure, "the rollout", self.dist)
        # Finished: raise_together raised every rank's error when this rollout did not.
        data = cast("TensorDict", data)
        return OnPolicyRollout(
            data=data,
            last_value=cast("Tensor", last_value),
            has_final_value=torch.tensor(has_final, device=self.device),
            approximate_bootstrap=approximate,
            episodes=self._track_episodes(data),
        )

    def _act(
        self,
        policy: ActorCritic,
        obs: Obs,
        *,
        act_tensors: Callable[[Obs], tuple[Tensor, Tensor, Tensor]] | None,
        state: TensorDict | None,
        step: int,
    ) -> tuple[Tensor, Tensor, Tensor, TensorDict | None]:
        """The action, log-prob and value at ``step``; a recurrent policy's next state.

        A recurrent policy (``state`` given) also has the state it read written
        to the buffer.
        """
        if state is not None:
            outputs = cast("StatefulActorCritic", policy).act_step(obs, state)
            self.buffer.write(step, state, prefix=STATE_KEY)
            return outputs["action"], outputs["log_prob"], outputs["value"], outputs[STATE_KEY]
        if act_tensors is not None:
            action, log_prob, value = act_tensors(obs)
            return action, log_prob, value, None
        outputs = policy.act(obs)
        return outputs["action"], outputs["log_prob"], outputs["value"], None

    def _final_values(
        self,
        *,
        policy: ActorCritic,
        result: StepResult,
        value: Tensor,
        step: int,
        approximate: bool,
        host_reads: bool,
        state: TensorDict | None = None,
    ) -> Tensor | None:
        """``V(final_obs)`` where truncated rows need it; ``None`` where no row does.

        ``state`` is a recurrent policy's state after this step's observation
        (before the ended rows restart), from which the terminal observation is read.
        """
        if approximate:
            # Documented approximation: bootstrap a time-out with V(obs_t).
            return value
        final_obs = result.final_obs
        if final_obs is None:
            raise EnvContractError(
                f"{type(self.env).__name__} reports provides_final_obs=True but returned "
                f"final_obs=None at step {step}; return the terminal observations, or report "
                "provides_final_obs=False so that time-outs use the documented approximation"
            )
        # When no row ended, the env may return its next observation as final_obs.
        if final_obs is result.obs:
            return None
        # Only truncated rows read V(final_obs): on the CPU, skip steps without one.
        if host_reads and not bool(result.truncated.any()):
            return None
        if state is not None and isinstance(policy, StatefulActorCritic):
            return policy.value_step(final_obs, state)
        return policy.value(final_obs)

    def _rollout_state(self, policy: StatefulActorCritic) -> TensorDict:
        """The state to continue from: the held one, or the initial state of every row."""
        if self._initial_state is None:
            self._initial_state = policy.initial_state(self.env.num_envs, device=self.device)
        if self._state is None:
            self._state = self._initial_state.clone()
        return self._state

    def _restart_ended(self, state: TensorDict, ended: Tensor) -> TensorDict:
        """``state`` with the ``ended`` rows set to the initial state (no host read)."""
        # Set by _rollout_state before the rollout's first step.
        initial = cast("TensorDict", self._initial_state)
        leaves: dict[Any, Tensor] = {}
        for key, entry in state.items(include_nested=True, leaves_only=True):
            leaf = cast("Tensor", entry)
            rows = ended.view(-1, *([1] * (leaf.dim() - 1)))
            leaves[key] = torch.where(rows, cast("Tensor", initial[key]), leaf)
        return TensorDict(leaves, batch_size=state.batch_size, device=state.device)

    def _nonfinite(
        self,
        data: TensorDict,
        last_obs: Obs,
        final_obs_ok: Tensor,
        last_value: Tensor,
        iteration: int,
    ) -> NonFiniteError | None:
        """A NonFiniteError naming the kind, key, row and step if the epoch is not finite.

        One host synchronisation when everything is finite, before advantages
        are computed, so nothing is updated from bad data.
        """
        valid: Tensor = data["valid"]
        bad = _bad_entries(data, last_obs, final_obs_ok, last_value, valid)
        flags = torch.stack([mask.any() for _, _, mask in bad])
        if not bool(flags.any()):
            return None
        return _describe_nonfinite(bad, iteration)

    def _track_episodes(self, data: TensorDict) -> EpochEpisodes:
        return self.episodes.update(
            data["reward"], data["terminated"] | data["truncated"], data["valid"]
        )

    # ------------------------------------------------------------------ state

    def state_dict(self) -> dict[str, Any]:
        """The env's state, the current observation and the running episodes' statistics.

        With a recurrent policy, also its rollout state (``"policy_state"``).
        Empty when the env is not checkpointable (no ``state_dict``): a resumed
        run then restarts the env (:attr:`needs_reset`) and the rollout state.
        """
        state = collector_state_dict(self.env, self._obs, self.episodes)
        if state and self._state is not None:
            state[_POLICY_STATE] = self._state.detach().clone().to_dict()
        return state

    def load_state_dict(self, state_dict: dict[str, Any], /) -> None:
        """Restore :meth:`state_dict`'s output; an empty dict asks for a fresh reset.

        Raises:
            CheckpointError: The state holds env state for an env that is not
                checkpointable, or lacks a piece (the key is named).
        """
        self._obs = load_collector_state(self.env, state_dict, self.episodes)
        policy_state = state_dict.get(_POLICY_STATE)
        self._state = (
            None
            if policy_state is None or self._obs is None
            else TensorDict(policy_state, batch_size=[self.env.num_envs], device=self.device)
        )


def _rows_finite(obs: Obs) -> Tensor:
    """Per row, whether every floating leaf of ``obs`` is finite (``[num_envs]``, no host sync)."""
    ok = torch.ones(obs.batch_size[0], dtype=torch.bool, device=obs.device)
    for leaf in obs.values(include_nested=True, leaves_only=True):
        if isinstance(leaf, Tensor) and leaf.is_floating_point():
            ok &= torch.isfinite(leaf).reshape(leaf.shape[0], -1).all(dim=1)
    return ok


# The order in which kinds are reported when several go bad at one step: causes first.
_KINDS = ("observation", "terminal observation", "reward", "policy output", "bootstrap value")


def _bad_entries(
    data: TensorDict, last_obs: Obs, final_obs_ok: Tensor, last_value: Tensor, valid: Tensor
) -> list[tuple[str, str, Tensor]]:
    """``(kind, key, bad)`` triples, ``bad`` being ``[num_steps, num_envs]``.

    Each entry is charged to the env step that produced it: an observation to
    the step that returned it.
    """
    steps = valid.shape[0]
    entries: list[tuple[str, str, Tensor]] = []
    observations: TensorDict = data[OBS_KEY]
    for key in observations.keys(include_nested=True, leaves_only=True):
        leaf = observations[key]
        if not (isinstance(leaf, Tensor) and leaf.is_floating_point()):
            continue
        last = last_obs[key]
        # Buffer row t + 1 holds what step t returned; the epoch's first observation
        # was checked with the epoch before (or came from reset), so it is charged to step 0.
        returned = torch.cat((leaf[1:], last.unsqueeze(0)), dim=0)
        bad = ~torch.isfinite(returned).reshape(steps, valid.shape[1], -1).all(dim=2)
        first_bad = ~torch.isfinite(leaf[0]).reshape(valid.shape[1], -1).all(dim=1)
        bad[0] |= first_bad
        name = key if isinstance(key, str) else ".".join(key)
        entries.append(("observation", name, bad))
    entries.append(("terminal observation", "final_obs", ~final_obs_ok & data["truncated"]))
    entries.append(("reward", "reward", ~torch.isfinite(data["reward"]) & valid))
    entries.append(("policy output", "log_prob", ~torch.isfinite(data["log_prob"]) & valid))
    value_bad = ~torch.isfinite(data["value"]) & valid
    # V(obs_T) after the last step: charged to the last step.
    value_bad[-1] |= ~torch.isfinite(last_value)
    entries.append(("policy output", "value", value_bad))
    # Only truncated rows use V(final_obs); other rows' entries are unused.
    final_value = torch.where(data["truncated"], data["final_value"], 0.0)
    entries.append(("bootstrap value", "final_value", ~torch.isfinite(final_value) & valid))
    return entries


def _describe_nonfinite(bad: list[tuple[str, str, Tensor]], iteration: int) -> NonFiniteError:
    """The error naming the first bad entry: earliest step, causes first, lowest row."""
    found: list[tuple[int, int, int, str, str]] = []
    for kind, key, mask in bad:
        hits = mask.nonzero()
        if hits.numel():
            step, row = (int(v) for v in hits[0])
            found.append((step, _KINDS.index(kind), row, kind, key))
    found.sort()
    step, _, row, kind, key = found[0]
    also = sorted({f"{k} {key_!r}" for s, _, _, k, key_ in found[1:] if s == step})
    extra = f" (also non-finite at that step: {', '.join(also)})" if also else ""
    return NonFiniteError(
        f"expected finite observations, rewards and policy outputs, got a non-finite {kind} "
        f"{key!r} in env row {row} at step {step} of iteration {iteration}{extra}; nothing "
        "was updated. Check the env (its state may have diverged) and the learning rate"
    )
