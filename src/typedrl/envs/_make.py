"""``typedrl.envs.make``: build and wrap a vector env in one call."""

import difflib
import functools
import importlib
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode

from typedrl._validation import describe, positive_int
from typedrl.envs._factory import (
    WrapperFactory,
    build_single_env,
    construction_error,
    make_from_factory,
    resolve_env_factory,
    resolve_wrapper,
)
from typedrl.envs._gymnasium import GymnasiumVecEnv
from typedrl.envs._workers import signal_safe_async_env
from typedrl.envs.builtin import make_builtin
from typedrl.errors import ConfigError, TypedRLError
from typedrl.protocols import VecEnv

__all__ = ["BUILTIN_PREFIX", "check_gymnasium_id", "make", "registering_module"]

BUILTIN_PREFIX = "typedrl/"
"""Env ids with this prefix name typedrl's built-in torch envs."""

Vectorization = Literal["sync", "async", "vector_entry_point"]


def make(
    env_id: str,
    *,
    num_envs: int,
    seed: int | None = None,
    device: torch.device | str = "cpu",
    vectorization: Vectorization = "sync",
    wrappers: Sequence[str | WrapperFactory] = (),
    float_dtype: Literal["float32", "float64"] = "float32",
    clip_actions: bool | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
) -> VecEnv:
    """Build a vector env by id and present it as a typedrl :class:`~typedrl.protocols.VecEnv`.

    Ids starting with ``"typedrl/"`` build a built-in torch env directly on
    ``device`` (no NumPy round trip); ``vectorization`` and ``wrappers`` do not
    apply to them. An id ``"module:callable"`` names a user factory, called
    with ``env_kwargs``: one with a ``num_envs`` parameter is called once (with
    ``seed`` and ``device`` too when it takes them) and returns a typedrl
    VecEnv, used as it is, or a Gymnasium vector env, adapted; any other
    returns one Gymnasium env and is called once to check that, then once per
    row of a Sync/Async vector env as below. Gymnasium's own ``"module:EnvId"``
    form still works (the module lacks the attribute but registered the id).
    Any other id goes through
    :func:`gymnasium.make_vec` and :class:`~typedrl.envs.GymnasiumVecEnv`:
    ``"sync"`` and ``"async"`` build same-step-autoreset Sync/Async vector envs
    of ``num_envs`` copies (each single env wrapped by ``wrappers``, in order);
    ``"vector_entry_point"`` uses the env's own vectorised implementation.
    Async workers ignore SIGINT and SIGTERM sent to the process group, so that
    a trainer stopped by a signal can save and close them.

    Args:
        env_id: A registered Gymnasium id (``"CartPole-v1"``), a built-in
            (``"typedrl/Pendulum-v0"``) or a factory (``"my_envs:make_env"``).
        num_envs: Number of rows.
        seed: Seed of the first ``reset`` if that call passes none.
        device: Device of every tensor.
        vectorization: How Gymnasium envs are batched.
        wrappers: Gymnasium wrappers applied to each single env (sync/async
            only): callables from env to env, or specs: a name
            (``"RecordEpisodeStatistics"`` for
            ``gymnasium.wrappers.RecordEpisodeStatistics``, a dotted path,
            ``"module:Class"``), optionally with keyword arguments of literal
            values (``"FrameStackObservation(stack_size=4)"``).
        float_dtype: Dtype of rewards and floating-point observations (a
            built-in env also takes it as ``env_kwargs["dtype"]``; the two
            must agree when both are given).
        clip_actions: Clip ``Box`` actions to the space's bounds; ``None``
            keeps the env's own rule (the built-in envs clip, as Gymnasium's
            own envs do inside ``step``; other envs get their actions as given).
        env_kwargs: Keyword arguments of the env's constructor.

    Returns:
        The wrapped env.

    Raises:
        ConfigError: For an unknown Gymnasium id, wrappers where they cannot
            apply, a non-positive ``num_envs``, a built-in env's
            ``env_kwargs`` dtype other than float32 or float64, or a
            factory or wrapper that cannot be imported, is not callable or
            returns the wrong type.

    Example:
        >>> env = make("CartPole-v1", num_envs=4, seed=0)
        >>> obs, _ = env.reset()
        >>> obs["obs"].shape
        torch.Size([4, 4])
        >>> env.close()
    """
    positive_int("make", "num_envs", num_envs)
    kwargs = dict(env_kwargs or {})
    resolved = [resolve_wrapper(item) if isinstance(item, str) else item for item in wrappers]
    if env_id.startswith(BUILTIN_PREFIX):
        if wrappers or vectorization != "sync":
            raise ConfigError(
                f"make({env_id!r}): built-in envs are torch-native; "
                "vectorization and wrappers do not apply"
            )
        if clip_actions is not None:
            kwargs = {**kwargs, "clip_actions": clip_actions}
        dtype = _builtin_dtype(env_id, float_dtype, kwargs.pop("dtype", None))
        env: VecEnv = make_builtin(
            env_id, num_envs=num_envs, seed=seed, device=device, dtype=dtype, **kwargs
        )
        return env
    if env_id.startswith("Isaac-"):
        if wrappers or vectorization != "sync" or float_dtype != "float32":
            raise ConfigError(
                f"make({env_id!r}): Isaac Lab envs are batched on their simulation device in "
                "float32; vectorization, wrappers and float_dtype do not apply"
            )
        from typedrl.envs._isaaclab import make_isaaclab  # noqa: PLC0415 - imports Isaac Lab

        return make_isaaclab(
            env_id,
            num_envs=num_envs,
            device=device,
            seed=seed,
            clip_actions="space" if clip_actions else None,
            env_kwargs=kwargs,
        )
    factory = resolve_env_factory(env_id) if ":" in env_id else None
    if factory is not None:
        return make_from_factory(
            env_id,
            factory,
            num_envs=num_envs,
            seed=seed,
            device=device,
            vectorization=vectorization,
            wrappers=resolved,
            float_dtype=float_dtype,
            clip_actions=bool(clip_actions),
            env_kwargs=kwargs,
        )
    check_gymnasium_id(env_id)
    if vectorization == "vector_entry_point" and resolved:
        raise ConfigError(
            "make: wrappers apply to single envs and need vectorization 'sync' or 'async'"
        )
    try:
        raw = _make_gymnasium(env_id, num_envs, vectorization, resolved, kwargs)
    except TypedRLError:
        raise
    except Exception as error:
        raise construction_error(env_id, kwargs, error) from error
    return GymnasiumVecEnv(
        raw,
        device=device,
        float_dtype=float_dtype,
        clip_actions=bool(clip_actions),
        default_seed=seed,
        env_id=env_id,
    )


def _make_gymnasium(
    env_id: str,
    num_envs: int,
    vectorization: Vectorization,
    wrappers: Sequence[WrapperFactory],
    kwargs: dict[str, Any],
) -> gym.vector.VectorEnv[Any, Any, Any]:
    """The Gymnasium vector env of a registered id (see :func:`make`)."""
    if vectorization == "vector_entry_point":
        return gym.make_vec(
            env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs
        )
    if vectorization == "async":
        # gym.make_vec's own single-env function (gym.make, then the wrappers), built here so
        # that each worker builds it through SignalSafeEnvFn.
        env_fn = functools.partial(
            build_single_env, functools.partial(gym.make, env_id), kwargs, tuple(wrappers)
        )
        return signal_safe_async_env(env_fn, num_envs)
    return gym.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode=vectorization,
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
        wrappers=list(wrappers) or None,
        **kwargs,
    )


def _builtin_dtype(
    env_id: str, float_dtype: Literal["float32", "float64"], from_kwargs: object
) -> Any:
    """The built-in env's dtype: ``env_kwargs["dtype"]`` when given, else ``float_dtype``."""
    if from_kwargs is None:
        return float_dtype
    # env_kwargs come untyped from the run's YAML: the env's constructor checks the value.
    if float_dtype not in ("float32", from_kwargs):
        raise ConfigError(
            f"make({env_id!r}): float_dtype={float_dtype!r} and env_kwargs dtype="
            f"{describe(from_kwargs)} disagree; give the dtype once"
        )
    return from_kwargs


_NAMESPACE_MODULES: Final = {"ALE": "ale_py", "dm_control": "shimmy"}
"""Gymnasium namespaces a package registers when imported, and that package's module."""

_PREFIX_MODULES: Final = (
    (("MiniGrid-", "BabyAI-"), "minigrid"),
    (
        ("Fetch", "HandReach", "HandManipulate", "AdroitHand", "AntMaze_", "PointMaze_"),
        "gymnasium_robotics",
    ),
    (("FrankaKitchen-",), "gymnasium_robotics"),
)
"""Name prefixes of the ids a package registers without a namespace, and its module."""

_HIGHWAY_NAMES: Final = frozenset(
    {
        "highway",
        "highway-fast",
        "merge",
        "merge-generic",
        "roundabout",
        "roundabout-generic",
        "parking",
        "parking-ActionRepeat",
        "parking-parked",
        "intersection",
        "intersection-multi-agent",
        "racetrack",
        "racetrack-large",
        "racetrack-oval",
        "two-way",
        "exit",
        "lane-keeping",
        "u-turn",
    }
)
"""The names (without version) of highway-env's ids."""

_PIP_NAMES: Final = {
    "ale_py": "ale-py",
    "shimmy": "'shimmy[dm-control]'",
    "minigrid": "minigrid",
    "gymnasium_robotics": "gymnasium-robotics",
    "highway_env": "highway-env",
}
"""How each of those modules is installed."""


def registering_module(env_id: str) -> str | None:
    """The module whose import registers ``env_id`` in Gymnasium, for the packages known here.

    Example:
        >>> registering_module("ALE/Pong-v5"), registering_module("MiniGrid-Empty-5x5-v0")
        ('ale_py', 'minigrid')
        >>> registering_module("highway-fast-v0"), registering_module("CartPole-v1")
        ('highway_env', None)
    """
    namespace, _, rest = env_id.rpartition("/")
    if namespace:
        return _NAMESPACE_MODULES.get(namespace)
    name = re.sub(r"-v\d+$", "", rest)
    if name in _HIGHWAY_NAMES:
        return "highway_env"
    for prefixes, module in _PREFIX_MODULES:
        if name.startswith(prefixes):
            return module
    return None


def _import_hint(env_id: str) -> str | None:
    """How to name ``env_id`` so that the package registering it is imported first."""
    module = registering_module(env_id)
    if module is not None:
        return (
            f"{module} registers it when imported: name it as {module}:{env_id} (Gymnasium's "
            f"module:EnvId form; installed with pip install {_PIP_NAMES[module]})"
        )
    namespace = env_id.rpartition("/")[0]
    if namespace and namespace not in {spec.namespace for spec in gym.registry.values()}:
        return (
            f"no package registered the namespace {namespace!r}: name the module that "
            f"registers it, as <module>:{env_id} (Gymnasium's module:EnvId form)"
        )
    return None


def check_gymnasium_id(env_id: str) -> None:
    """Raise :class:`~typedrl.errors.ConfigError` unless Gymnasium knows ``env_id``.

    The message passes Gymnasium's own hint on ("Did you mean", the versions
    it provides) and adds the closest registered ids, compared without case.
    An id that a package registers when imported (``ALE/Pong-v5``, any
    ``Namespace/Name-vN`` whose namespace nobody registered) gets the
    ``module:EnvId`` form that imports the package first.

    Example:
        >>> check_gymnasium_id("CartPole-V1")
        Traceback (most recent call last):
        ...
        typedrl.errors.ConfigError: unknown env id 'CartPole-V1': Environment ...
        >>> check_gymnasium_id("ALE/Pong-v5")
        Traceback (most recent call last):
        ...
        typedrl.errors.ConfigError: unknown env id 'ALE/Pong-v5': ale_py registers it when
        imported: name it as ale_py:ALE/Pong-v5 (Gymnasium's module:EnvId form; installed with
        pip install ale-py)
    """
    # Gymnasium's "module:EnvId" form: importing the module registered EnvId.
    module, _, name = env_id.rpartition(":")
    if module:
        importlib.import_module(module)
    try:
        gym.spec(name)
    except (gym.error.UnregisteredEnv, gym.error.DeprecatedEnv) as error:
        hint = None if module else _import_hint(env_id)
        if hint is not None:
            raise ConfigError(f"unknown env id {env_id!r}: {hint}") from error
        known = {name.lower(): name for name in gym.registry}
        close = [known[name] for name in difflib.get_close_matches(env_id.lower(), known, n=3)]
        closest = f"; closest registered ids: {close}" if close else ""
        said = str(error).strip().rstrip(".")
        raise ConfigError(
            f"unknown env id {env_id!r}: {said}{closest} (expected a Gymnasium id such as "
            f"'CartPole-v1', a built-in id {BUILTIN_PREFIX}<Name>-v0 or module:callable)"
        ) from error
