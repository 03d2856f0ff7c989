"""Envs and wrappers named by import path: ``"package.module:factory"``, ``"ClipReward"``.

What a ``module:callable`` env spec may return, and how it is called:

- a callable with a ``num_envs`` parameter is a *vector factory*: it is called
  once, as ``factory(num_envs=N, **env_kwargs)`` (plus ``seed=`` and
  ``device=`` and ``float_dtype=`` when it takes them, by name or through a
  TypedDict its ``**kwargs`` unpack; the seed folded by
  :func:`~typedrl.seeding.env_seed`, so that row ``i``'s ``seed + i`` is below
  ``2**32``), and returns a typedrl
  :class:`~typedrl.protocols.VecEnv` (used as it is: a ``float_dtype`` of
  ``"float64"`` that it does not take must match its observation space) or a Gymnasium
  :class:`~gymnasium.vector.VectorEnv` (adapted by
  :class:`~typedrl.envs.GymnasiumVecEnv`);
- any other callable is a *single-env factory*: ``factory(**env_kwargs)``
  returns one :class:`gymnasium.Env`; it is called once to check that, and
  once per row inside a same-step-autoreset Sync or Async vector env, each
  env wrapped by the wrappers asked for.

A spec whose attribute the module lacks but whose tail is an env id the import
registered (Gymnasium's own ``"module:EnvId"`` form) is left to Gymnasium.
"""

import contextlib
import functools
import importlib
import inspect
import re
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, final

import gymnasium as gym
import numpy as np
import torch
import typing_extensions
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv

from typedrl._validation import describe
from typedrl._wrapper_spec import parse_wrapper_spec
from typedrl.envs._gymnasium import GymnasiumVecEnv
from typedrl.envs._row_check import RowShapeCheck
from typedrl.envs._workers import signal_safe_async_env
from typedrl.errors import ConfigError, EnvError, MissingDependencyError, TypedRLError
from typedrl.protocols import VecEnv
from typedrl.seeding import env_seed

__all__ = [
    "ConfiguredWrapper",
    "WrapperFactory",
    "accepts",
    "build_single_env",
    "construction_error",
    "make_from_factory",
    "missing_dependency",
    "resolve_env_factory",
    "resolve_wrapper",
]

# typing_extensions (a dependency of torch) has its own Unpack before Python 3.12.
_UNPACK: frozenset[object] = frozenset({typing.Unpack, typing_extensions.Unpack})

WrapperFactory = Callable[[gym.Env[Any, Any]], gym.Wrapper[Any, Any, Any, Any]]
"""What wraps one single env: a wrapper class or any callable from env to a wrapper."""


def _import_attribute(spec: str, what: str) -> tuple[Any, str, str] | None:
    """``(attribute, module, name)`` for ``"module:name"``; ``None`` when the module lacks it.

    Raises:
        ConfigError: The spec is malformed or the module does not exist.
        MissingDependencyError: The module exists but imports a package that is not
            installed.
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"{what} {spec!r}: expected 'module:name', e.g. 'my_envs:make_env'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        missing = error.name
        if missing is not None and not _is_package_of(missing, module_name):
            raise missing_dependency(f"{what} {spec!r}", error) from error
        raise ConfigError(
            f"{what} {spec!r}: cannot import module {module_name!r} ({error})"
        ) from None
    value: Any = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            return None
        value = getattr(value, part)
    return value, module_name, attribute


def _is_package_of(name: str, module: str) -> bool:
    """Whether ``name`` is ``module`` or one of the packages it lies in."""
    return module == name or module.startswith(f"{name}.")


_DISTRIBUTIONS: Final = {
    "cv2": "opencv-python",
    "PIL": "pillow",
    "yaml": "pyyaml",
    "sklearn": "scikit-learn",
    "Box2D": "box2d",
}
"""Import names whose pip package has another name."""


def missing_dependency(what: str, error: Exception) -> MissingDependencyError:
    """The one-line error for ``what`` needing a package that is not installed.

    ``error`` is an :class:`ImportError` or Gymnasium's
    :class:`~gymnasium.error.DependencyNotInstalled` (whose cause, when it has one,
    names the module). The message names the package and the pip command: the one
    the package's own message gives, else ``pip install <package>``.

    Example:
        >>> print(missing_dependency("wrapper 'W'", ModuleNotFoundError(name="cv2")))
        wrapper 'W' needs the package 'opencv-python' (module 'cv2'), which is not installed:
        pip install opencv-python
    """
    cause = error if isinstance(error, ImportError) else error.__cause__
    module = cause.name if isinstance(cause, ImportError) else None
    said = " ".join(str(error).split())
    suggested = re.search(r"pip install [^`\n]+?(?=`|$| to )", said)
    package = (
        None if module is None else _DISTRIBUTIONS.get(module.split(".")[0], module.split(".")[0])
    )
    if package is not None:
        needs = f"the package {package!r} (module {module!r})"
    else:
        needs = f"a package that is not installed ({said})"
    if suggested is not None:
        command = suggested.group(0).strip()
    elif package is not None:
        command = f"pip install {package}"
    else:
        return MissingDependencyError(f"{what} needs {needs}; install the package it names")
    if package is None:
        return MissingDependencyError(f"{what} needs {needs}: {command}")
    return MissingDependencyError(f"{what} needs {needs}, which is not installed: {command}")


def resolve_env_factory(spec: str) -> Callable[..., Any] | None:
    """The callable an env spec ``"module:callable"`` names.

    Returns ``None`` for Gymnasium's ``"module:EnvId"`` form (the module
    imports, lacks the attribute, and registered ``EnvId``): build that one
    with :func:`gymnasium.make`.

    Raises:
        ConfigError: The spec is malformed, the module does not import, the
            attribute is missing (and no env id of that name is registered),
            or it is not callable.

    Example:
        >>> resolve_env_factory("gymnasium.envs.classic_control:CartPoleEnv").__name__
        'CartPoleEnv'
    """
    found = _import_attribute(spec, "env")
    module_name, _, attribute = spec.partition(":")
    if found is None:
        if attribute in gym.registry:
            return None
        raise ConfigError(
            f"env {spec!r}: module {module_name!r} has no attribute {attribute!r} "
            "(and no env id of that name is registered)"
        )
    factory = found[0]
    if not callable(factory):
        raise ConfigError(
            f"env {spec!r}: {attribute!r} is not callable, got {describe(factory)}; name a "
            "function or class that returns an env"
        )
    return factory  # type: ignore[no-any-return]


@final
@dataclass(frozen=True, slots=True)
class ConfiguredWrapper:
    """A wrapper with the keyword arguments of its spec, called on each single env.

    Example:
        >>> import gymnasium as gym
        >>> frames = resolve_wrapper("FrameStackObservation(stack_size=4)")
        >>> frames(gym.make("CartPole-v1")).observation_space.shape
        (4, 4)
    """

    spec: str
    """The spec as given (``"FrameStackObservation(stack_size=4)"``), for messages."""
    wrapper: Callable[..., gym.Wrapper[Any, Any, Any, Any]]
    """The wrapper class (or any callable from env to wrapper)."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Its keyword arguments after the env."""

    def __call__(self, env: gym.Env[Any, Any]) -> gym.Wrapper[Any, Any, Any, Any]:
        """``wrapper(env, **kwargs)``; its failures a user can fix as one-line errors.

        Raises:
            MissingDependencyError: The wrapper needs a package that is not installed.
            ConfigError: The wrapper refused its arguments or the env (a ``TypeError``
                or ``ValueError`` of its constructor).
        """
        try:
            return self.wrapper(env, **self.kwargs)
        except (gym.error.DependencyNotInstalled, ImportError) as error:
            raise missing_dependency(f"wrapper {self.spec!r}", error) from error
        except (TypeError, ValueError) as error:
            given = ", ".join(f"{key}={value!r}" for key, value in self.kwargs.items())
            said = " ".join(str(error).split())
            raise ConfigError(
                f"wrapper {self.spec!r} could not wrap the env with "
                f"{f'arguments {given}' if given else 'no arguments'}: {type(error).__name__}: "
                f"{said}; check its arguments against its documentation"
            ) from error


def resolve_wrapper(spec: str) -> ConfiguredWrapper:
    """The wrapper a spec names, with its arguments: see :mod:`typedrl._wrapper_spec`.

    ``"Name"`` is ``gymnasium.wrappers.Name``; ``"a.b.Name"`` and ``"a.b:Name"``
    are imported; ``"Name(key=value, ...)"`` adds keyword arguments of literal
    values, checked against the wrapper's signature here.

    Raises:
        ConfigError: The spec does not parse, names no wrapper, names one that is
            not callable, or gives arguments its signature does not take (the
            message names the argument).
        MissingDependencyError: The wrapper's module imports a package that is
            not installed.

    Example:
        >>> resolve_wrapper("RecordEpisodeStatistics").wrapper.__name__
        'RecordEpisodeStatistics'
        >>> resolve_wrapper("FrameStackObservation(stack=4)")
        Traceback (most recent call last):
        ...
        typedrl.errors.ConfigError: wrapper 'FrameStackObservation(stack=4)': got an unexpected
        keyword argument 'stack'; FrameStackObservation takes ['stack_size', 'padding_type']
    """
    parsed = parse_wrapper_spec(spec)
    name = parsed.name
    wrapper: Any
    if ":" in name or "." in name:
        path = name if ":" in name else ":".join(name.rsplit(".", 1))
        found = _import_attribute(path, "wrapper")
        if found is None:
            module_name, _, attribute = path.partition(":")
            raise ConfigError(
                f"wrapper {spec!r}: module {module_name!r} has no attribute {attribute!r}"
            )
        wrapper = found[0]
    else:
        wrapper = getattr(gym.wrappers, name, None)
        if wrapper is None:
            raise ConfigError(
                f"wrapper {spec!r}: gymnasium.wrappers has no {name!r}; name one of its "
                "wrappers (e.g. 'TimeLimit', 'FrameStackObservation(stack_size=4)') or your "
                "own as 'module:Class'"
            )
    if not callable(wrapper):
        raise ConfigError(f"wrapper {spec!r} is not callable, got {describe(wrapper)}")
    _check_arguments(spec, wrapper, parsed.kwargs)
    return ConfiguredWrapper(spec, wrapper, parsed.kwargs)


def _check_arguments(spec: str, wrapper: Callable[..., Any], kwargs: Mapping[str, Any]) -> None:
    """Refuse keyword arguments the wrapper's signature does not take, or lacks (one line)."""
    try:
        signature = inspect.signature(wrapper)
    except (TypeError, ValueError):  # no signature to check against: the call will tell
        return
    try:
        # The env comes first, positionally, as a vector env's builder passes it; unknown
        # arguments are named before missing ones.
        signature.bind_partial(None, **kwargs)
        signature.bind(None, **kwargs)
    except TypeError as error:
        takes = [
            parameter.name
            for parameter in list(signature.parameters.values())[1:]
            if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
        ]
        title = getattr(wrapper, "__name__", spec)
        raise ConfigError(f"wrapper {spec!r}: {error}; {title} takes {takes}") from None


def accepts(factory: Callable[..., Any], name: str) -> bool:
    """Whether ``factory`` takes ``name``.

    It does when it has a parameter of that name, or when its ``**kwargs`` unpack a
    TypedDict with that key (``**options: Unpack[EnvOptions]``, with ``typing``'s or
    ``typing_extensions``' ``Unpack``, written out or as a string annotation).
    """
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # a builtin without a signature
        return False
    # Annotations written as strings (postponed evaluation) as objects; one that
    # does not evaluate stays a string.
    with contextlib.suppress(Exception):
        signature = inspect.signature(factory, eval_str=True)
    parameters = signature.parameters
    if name in parameters:
        return True
    return any(
        parameter.kind is inspect.Parameter.VAR_KEYWORD
        and name in _unpacked_keys(parameter.annotation)
        for parameter in parameters.values()
    )


def _unpacked_keys(annotation: object) -> frozenset[str]:
    """The keys of the TypedDict in ``Unpack[TD]``; none for any other annotation."""
    if typing.get_origin(annotation) not in _UNPACK:
        return frozenset()
    (unpacked,) = typing.get_args(annotation)
    keys: frozenset[str] = getattr(unpacked, "__required_keys__", frozenset()) | getattr(
        unpacked, "__optional_keys__", frozenset()
    )
    return keys


def make_from_factory(
    spec: str,
    factory: Callable[..., Any],
    *,
    num_envs: int,
    seed: int | None,
    device: torch.device | str,
    vectorization: Literal["sync", "async", "vector_entry_point"],
    wrappers: Sequence[WrapperFactory],
    float_dtype: Literal["float32", "float64"],
    clip_actions: bool,
    env_kwargs: Mapping[str, Any],
) -> VecEnv:
    """Build a vector env from a user factory (see the module docstring for the rules).

    Raises:
        ConfigError: The factory could not be called with the arguments (a
            ``TypeError``), returned something else than what its kind must
            return (a vector env from a factory without ``num_envs``, as
            EnvPool's ``make_gymnasium`` is), or options that cannot apply to
            it were given.
        EnvError: The factory raised an exception of its own (chained).
    """
    kwargs = dict(env_kwargs)
    if accepts(factory, "num_envs"):
        if wrappers or vectorization != "sync":
            raise ConfigError(
                f"env {spec!r} builds vector envs itself (it takes num_envs): vectorization "
                "and wrappers apply only to single-env factories"
            )
        # A float_dtype of the user's own env_kwargs wins; seed and device are the run's,
        # the seed folded as the Gymnasium adapter folds the seeds of its resets.
        folded = None if seed is None else env_seed(seed, rows=num_envs)
        offered = {"seed": folded, "device": device, "float_dtype": float_dtype}
        extras: dict[str, Any] = {
            name: value
            for name, value in offered.items()
            if accepts(factory, name) and not (name == "float_dtype" and name in kwargs)
        }
        built = _call(spec, factory, {**kwargs, **extras, "num_envs": num_envs})
        if isinstance(built, VecEnv):
            if "float_dtype" not in {**kwargs, **extras}:
                _check_float_dtype(spec, built, float_dtype)
            if clip_actions:
                built.close()
                raise ConfigError(
                    f"env {spec!r} returned a typedrl VecEnv, which applies its own action "
                    "rule; clip_actions applies only to Gymnasium envs (leave it unset)"
                )
            if built.num_envs != num_envs:
                raise ConfigError(
                    f"env {spec!r} returned a VecEnv of {built.num_envs} rows, "
                    f"expected num_envs={num_envs}"
                )
            return built
        if isinstance(built, VectorEnv):
            return GymnasiumVecEnv(
                built,
                device=device,
                float_dtype=float_dtype,
                clip_actions=clip_actions,
                default_seed=seed,
                env_id=spec,
            )
        raise ConfigError(
            f"env {spec!r} takes num_envs, so it must return a typedrl VecEnv or a Gymnasium "
            f"VectorEnv, got {describe(built)}"
        )
    if vectorization == "vector_entry_point":
        raise ConfigError(
            f"env {spec!r} returns single envs: vectorization must be 'sync' or 'async'"
        )
    _probe_single_env(spec, factory, kwargs)
    env_fn = functools.partial(build_single_env, factory, kwargs, tuple(wrappers))
    raw: VectorEnv[Any, Any, Any]
    if vectorization == "async":
        raw = signal_safe_async_env(env_fn, num_envs)
    else:
        # Each row's observation shape is checked before SyncVectorEnv batches it.
        env_fns = [
            functools.partial(_checked_row, env_fn, row=row, env_id=spec) for row in range(num_envs)
        ]
        raw = SyncVectorEnv(env_fns, autoreset_mode=AutoresetMode.SAME_STEP)
    return GymnasiumVecEnv(
        raw,
        device=device,
        float_dtype=float_dtype,
        clip_actions=clip_actions,
        default_seed=seed,
        env_id=spec,
    )


def _probe_single_env(spec: str, factory: Callable[..., Any], kwargs: Mapping[str, Any]) -> None:
    """Build one env with a factory that takes no ``num_envs`` and check that it is one env.

    Raises:
        ConfigError: It returned a vector env or something else than a gymnasium.Env.
    """
    probe = _call(spec, factory, kwargs)
    if isinstance(probe, VectorEnv | VecEnv):
        # EnvPool's envs are both a gymnasium.Env and a VectorEnv: a batch, never one row.
        if isinstance(probe, VectorEnv):
            probe.close()
        raise ConfigError(
            f"env {spec!r} returned a vector env ({type(probe).__name__}) from a factory "
            "without a num_envs parameter, which builds single envs; name a factory that "
            "takes num_envs and returns the vector env (def make(num_envs): ...)"
        )
    if not isinstance(probe, gym.Env):
        raise ConfigError(
            f"env {spec!r} must return a gymnasium.Env (it takes no num_envs), "
            f"got {describe(probe)}"
        )
    probe.close()


def _float_dtypes(space: gym.Space[Any]) -> set[str]:
    """The floating-point dtypes of a space's ``Box`` leaves, by name."""
    if isinstance(space, gym.spaces.Dict):
        return set().union(*(_float_dtypes(sub) for sub in space.spaces.values()))
    if isinstance(space, gym.spaces.Box) and np.issubdtype(space.dtype, np.floating):
        return {str(space.dtype)}
    return set()


def _check_float_dtype(spec: str, env: VecEnv, float_dtype: str) -> None:
    """Refuse ``float_dtype="float64"`` for a VecEnv whose observations are of another float."""
    if float_dtype == "float32":
        # The default: a factory's own dtype is used as it is.
        return
    found = _float_dtypes(env.single_observation_space)
    if found - {float_dtype}:
        env.close()
        raise ConfigError(
            f"env {spec!r} returned a typedrl VecEnv with {sorted(found)} observations, "
            f"expected float_dtype={float_dtype!r}; give the factory a float_dtype parameter "
            "(it is then passed on), or leave --float-dtype out"
        )


def _call(spec: str, factory: Callable[..., Any], kwargs: Mapping[str, Any]) -> Any:
    try:
        return factory(**kwargs)
    except TypedRLError:
        raise
    except TypeError as error:
        raise ConfigError(
            f"env {spec!r} could not be called with {sorted(kwargs)} ({error}); "
            "check --env-kwargs against its parameters"
        ) from None
    except Exception as error:
        raise construction_error(spec, kwargs, error) from error


def construction_error(
    spec: str, kwargs: Mapping[str, Any], error: Exception
) -> ConfigError | EnvError:
    """The error for an env whose construction raised ``error``, in one line.

    It names the env, the keyword arguments it was built with, the
    exception's type and message, and the next step: a ``TypeError`` (an
    argument the env does not take) becomes :class:`~typedrl.errors.ConfigError`,
    anything else :class:`~typedrl.errors.EnvError`.

    Example:
        >>> print(construction_error("my_envs:make", {"size": -1}, ValueError("size < 0")))
        building env 'my_envs:make' with env_kwargs {'size': -1} raised ValueError: size < 0; ...
    """
    said = " ".join(str(error).split())
    given = f" with env_kwargs {dict(kwargs)!r}" if kwargs else ""
    hint = (
        "check --env-kwargs against the env's parameters"
        if kwargs
        else f"run `typedrl check-env {spec}` to reproduce it alone"
    )
    message = f"building env {spec!r}{given} raised {type(error).__name__}: {said}; {hint}"
    return ConfigError(message) if isinstance(error, TypeError) else EnvError(message)


def _checked_row(
    env_fn: Callable[[], gym.Env[Any, Any]], *, row: int, env_id: str
) -> gym.Env[Any, Any]:
    """``env_fn()`` with the observation shape of row ``row`` checked (:class:`RowShapeCheck`)."""
    return RowShapeCheck(env_fn(), row=row, env_id=env_id)


def build_single_env(
    factory: Callable[..., Any], kwargs: Mapping[str, Any], wrappers: Sequence[WrapperFactory]
) -> gym.Env[Any, Any]:
    """``factory(**kwargs)``, wrapped by each of ``wrappers`` in turn."""
    env: gym.Env[Any, Any] = factory(**kwargs)
    for wrapper in wrappers:
        env = wrapper(env)
    return env
