"""Whether a policy a user passes to a trainer fits the run: its protocol, device, dtype, spaces."""

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from lightning_fabric import Fabric
from tensordict import TensorDict
from torch import Tensor, nn

from typedrl._tensor_checks import same_device
from typedrl._validation import describe, no_type_check
from typedrl.errors import ConfigError
from typedrl.policies import PolicyFactory
from typedrl.protocols import StatefulActorCritic, VecEnv
from typedrl.types import Obs

__all__ = ["check_given_policy", "given_policy", "policy_fit_error", "zero_observation"]

_ROWS = 2


def zero_observation(space: gym.Space[Any], *, rows: int, device: torch.device) -> Obs | None:
    """``rows`` observations of zeros shaped and typed as ``space``'s (``None``: no such form).

    A ``Box`` space is the key ``"obs"``; a ``Dict`` space gives one key per
    entry (nested ``Dict`` entries nest).
    """
    leaves = _zero_leaves(space, rows=rows, device=device)
    if leaves is None:
        return None
    if not isinstance(leaves, dict):
        leaves = {"obs": leaves}
    return TensorDict(leaves, batch_size=[rows], device=device)


def _zero_leaves(
    space: gym.Space[Any], *, rows: int, device: torch.device
) -> Tensor | dict[str, Any] | None:
    if isinstance(space, gym.spaces.Dict):
        nested: dict[str, Any] = {}
        for key, sub in space.spaces.items():
            leaf = _zero_leaves(sub, rows=rows, device=device)
            if leaf is None:
                return None
            nested[key] = leaf
        return nested
    shape, dtype = space.shape, space.dtype
    if shape is None or dtype is None:
        return None
    zeros = np.zeros((rows, *shape), dtype=dtype)
    return torch.from_numpy(zeros).to(device)


# Validates its own arguments: a wrong one is a ConfigError naming it, not a type-check error.
@no_type_check
def given_policy(
    policy: nn.Module | None, factory: PolicyFactory | None, env: VecEnv, *, init_seed: int
) -> tuple[PolicyFactory | None, nn.Module | None]:
    """What a trainer's ``policy=`` and ``policy_factory=`` mean: the factory to record, the policy.

    A factory alone builds the policy from the env's spaces, with torch's
    global generator seeded from ``init_seed`` (the run's ``"init"`` stream,
    from which the default policy's weights come too) and restored afterwards,
    so that the same seed builds the same weights. ``(None, None)`` means the
    trainer's own default policy.

    Raises:
        ConfigError: ``policy_factory`` is not a :class:`~typedrl.policies.PolicyFactory`,
            or building with it fails.
    """
    if factory is not None and not isinstance(factory, PolicyFactory):
        raise ConfigError(f"policy_factory must be a PolicyFactory, got {describe(factory)}")
    if policy is None and factory is not None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(init_seed)
            policy = factory.build(env.single_observation_space, env.single_action_space)
    return factory, policy


@no_type_check  # policy= and policy_factory= come from the user: checked here, in words
def check_given_policy(
    policy: nn.Module | None,
    factory: PolicyFactory | None,
    env: VecEnv,
    *,
    init_seed: int,
    protocol: type,
    outputs: tuple[str, ...],
    fabric: Fabric,
    owner: str,
) -> tuple[PolicyFactory | None, nn.Module | None, ConfigError | None]:
    """A trainer's ``policy=`` and ``policy_factory=``, built and checked on one rank.

    :func:`given_policy`, then :func:`policy_fit_error` on the policy it gives.
    The error is returned, not raised, so that every rank can refuse together.
    """
    try:
        factory, policy = given_policy(policy, factory, env, init_seed=init_seed)
    except ConfigError as failure:
        return None, None, failure
    if policy is None:
        return factory, None, None
    error = policy_fit_error(
        policy, env, protocol=protocol, outputs=outputs, fabric=fabric, owner=owner
    )
    return factory, policy, error


def _space(space: gym.Space[Any]) -> str:
    """A space in a few words: a ``Box``'s shape and dtype (its bounds can be long)."""
    if isinstance(space, gym.spaces.Box):
        return f"Box{space.shape} {space.dtype}"
    if isinstance(space, gym.spaces.Dict):
        return "Dict(" + ", ".join(f"{k}: {_space(v)}" for k, v in space.spaces.items()) + ")"
    return repr(space)


def _dtype(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _devices(module: nn.Module) -> list[torch.device]:
    tensors = [*module.parameters(), *module.buffers()]
    return list(dict.fromkeys(tensor.device for tensor in tensors))


def policy_fit_error(
    policy: object,
    env: VecEnv,
    *,
    protocol: type,
    outputs: tuple[str, ...],
    fabric: Fabric,
    owner: str,
) -> ConfigError | None:
    """Why ``policy`` cannot train on ``env`` in ``fabric``'s run, in one line; ``None`` if it can.

    Checked in order:

    1. A :class:`torch.nn.Module` that implements ``protocol``; a recurrent
       :class:`~typedrl.protocols.StatefulActorCritic` only where ``protocol``
       admits one (PPO's; APG and SHAC backpropagate through single steps).
    2. Every parameter and buffer on the run's device, or on the CPU (the
       trainer moves it).
    3. Floating-point parameters in float32, or in the dtype Fabric's
       precision converts modules to (float64 under ``"64-true"``).
    4. The spaces: one eval-mode, no-grad ``act(obs, deterministic=True)`` on
       two rows of zeros shaped as the env's observations must return
       ``"action"`` of shape ``[2, *action_space.shape]`` (integers for a
       discrete space, floats for a ``Box``) and each of ``outputs`` of shape
       ``[2]``. The policy's train/eval mode is restored.
    5. A :class:`~typedrl.protocols.StatefulActorCritic`'s next state, under
       ``"state"`` in that forward, has exactly the keys, per-row shapes and
       dtypes of its ``state_specs``.

    Args:
        policy: What the user passed as ``policy=``.
        env: This rank's training env.
        protocol: The policy protocol the trainer needs (``ActorCritic``, ...).
        outputs: Keys besides ``"action"`` that ``act`` must return.
        fabric: The run's Fabric (device and precision).
        owner: The trainer's name, for the messages.
    """
    where = f"{owner}(policy=...)"
    name = protocol.__name__
    if isinstance(policy, StatefulActorCritic) and protocol not in StatefulActorCritic.__mro__:
        return ConfigError(
            f"{where} does not train recurrent policies ({type(policy).__name__} declares a "
            f"rollout state; {owner} needs a stateless typedrl.protocols.{name}): train it "
            "with PPO, or pass a feed-forward policy"
        )
    if not isinstance(policy, nn.Module) or not isinstance(policy, protocol):
        return ConfigError(
            f"{where} takes a torch.nn.Module implementing typedrl.protocols.{name}, got "
            f"{describe(policy)}"
        )
    run_device = fabric.device
    foreign = [
        device
        for device in _devices(policy)
        if device.type != "cpu" and not same_device(device, run_device)
    ]
    if foreign:
        return ConfigError(
            f"{where}: the policy is on {foreign[0]}, the run on {run_device}; build it on the "
            f"CPU or move it with policy.to({str(run_device)!r})"
        )
    # A module on the meta device: converting it draws no random numbers, allocates nothing.
    probe = nn.Linear(1, 1, device="meta")
    fabric.strategy.precision.convert_module(probe)
    allowed = {_dtype(torch.float32), _dtype(probe.weight.dtype)}
    wrong = sorted(
        {_dtype(p.dtype) for p in policy.parameters() if p.is_floating_point()} - allowed
    )
    if wrong:
        precision = type(fabric.strategy.precision).__name__
        return ConfigError(
            f"{where}: the policy has {' and '.join(wrong)} parameters, but this run (Fabric's "
            f"{precision}) trains {' or '.join(sorted(allowed))} ones; convert it "
            "(policy.float()) or choose the precision of its dtype"
        )
    return _spaces_error(policy, env, outputs=outputs, where=where)


def _spaces_error(
    policy: nn.Module, env: VecEnv, *, outputs: tuple[str, ...], where: str
) -> ConfigError | None:
    observation_space, action_space = env.single_observation_space, env.single_action_space
    spaces = f"observation space {_space(observation_space)}, action space {_space(action_space)}"
    devices = _devices(policy)
    device = devices[0] if devices else torch.device("cpu")
    obs = zero_observation(observation_space, rows=_ROWS, device=device)
    if obs is None:  # a space without a fixed shape: the first rollout checks it
        return None
    fix = "build it for env.single_observation_space and env.single_action_space"
    was_training = policy.training
    policy.train(mode=False)
    try:
        with torch.no_grad():
            result: object = policy.act(obs, deterministic=True)  # type: ignore[operator]
    except Exception as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return ConfigError(
            f"{where}: the policy does not fit the env's {spaces}: act on a zero observation "
            f"raised {type(error).__name__}: {first}; {fix}"
        )
    finally:
        policy.train(mode=was_training)
    refusal = _outputs_error(result, action_space, outputs=outputs, spaces=spaces, where=where)
    if (
        refusal is None
        and isinstance(policy, StatefulActorCritic)
        and isinstance(result, TensorDict)
    ):
        return _state_error(policy, result, where=where)
    return refusal


def _state_error(
    policy: StatefulActorCritic, result: TensorDict, *, where: str
) -> ConfigError | None:
    """Whether the setup forward's next state (``"state"``) matches the declared ``state_specs``.

    One line naming the first key that is missing, undeclared, or of another
    per-row shape or dtype than declared.
    """
    state = result.get("state", None)
    if not isinstance(state, TensorDict):
        return ConfigError(
            f"{where}: a recurrent policy's act must return its next state under 'state', "
            f"got the keys {sorted(result.keys())}"
        )
    specs = policy.state_specs
    got = {key: state[key] for key in state.keys()}  # noqa: SIM118 - TensorDict
    for key, spec in specs.items():
        if key not in got:
            return ConfigError(
                f"{where}: state key {key!r}: expected shape {list(spec.shape)} and dtype "
                f"{_dtype(spec.dtype)} (state_specs), the setup forward returned no such key "
                f"(it returned {sorted(got)})"
            )
        leaf = got[key]
        if tuple(leaf.shape[1:]) != spec.shape or leaf.dtype != spec.dtype:
            return ConfigError(
                f"{where}: state key {key!r}: expected shape {list(spec.shape)} and dtype "
                f"{_dtype(spec.dtype)} (state_specs), the setup forward returned shape "
                f"{list(leaf.shape[1:])} and dtype {_dtype(leaf.dtype)}"
            )
    undeclared = sorted(set(got) - set(specs))
    if undeclared:
        return ConfigError(
            f"{where}: state key {undeclared[0]!r} of shape {list(got[undeclared[0]].shape[1:])} "
            f"is not declared in state_specs (declared: {sorted(specs)})"
        )
    return None


def _outputs_error(
    result: object,
    action_space: gym.Space[Any],
    *,
    outputs: tuple[str, ...],
    spaces: str,
    where: str,
) -> ConfigError | None:
    """Whether ``act``'s result on two rows has the action and the outputs a trainer needs."""
    fix = "build it for env.single_observation_space and env.single_action_space"
    if not isinstance(result, TensorDict):
        return ConfigError(f"{where}: act must return a TensorDict, got {describe(result)}")
    expected_shape = (_ROWS, *(action_space.shape or ()))
    missing = [key for key in ("action", *outputs) if key not in result.keys()]  # noqa: SIM118
    if missing:
        return ConfigError(
            f"{where}: act returned the keys {sorted(result.keys())}, without {missing}"
        )
    action: Tensor = result["action"]
    discrete = isinstance(
        action_space, gym.spaces.Discrete | gym.spaces.MultiDiscrete | gym.spaces.MultiBinary
    )
    kind_ok = not action.is_floating_point() if discrete else action.is_floating_point()
    if tuple(action.shape) != expected_shape or not kind_ok:
        return ConfigError(
            f"{where}: the policy does not fit the env's {spaces}: act returned an action of "
            f"shape {list(action.shape)} and dtype {action.dtype} for {_ROWS} rows, expected "
            f"shape {list(expected_shape)} of {'integers' if discrete else 'floats'}; {fix}"
        )
    for key in outputs:
        value: Tensor = result[key]
        if tuple(value.shape) != (_ROWS,):
            return ConfigError(
                f"{where}: act returned {key!r} of shape {list(value.shape)} for {_ROWS} rows, "
                f"expected [{_ROWS}]"
            )
    return None
