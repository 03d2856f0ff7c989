"""How a run rebuilds its policy: an importable factory and its JSON-like keyword arguments."""

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, final

import gymnasium as gym
from torch import nn

from typedrl._validation import describe, json_like, no_type_check
from typedrl.errors import ConfigError

__all__ = ["PolicyFactory"]

_TARGET: Final = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
"""``package.module:attribute``, the attribute possibly dotted (``module:Class.build``)."""


@final
@no_type_check
@dataclass(frozen=True, slots=True)
class PolicyFactory:
    """An importable function that builds a policy, and the keyword arguments to call it with.

    A run records its factory in every checkpoint and in its ``config.yaml``,
    so that ``typedrl evaluate``, ``export``, ``--video`` and ``train
    --resume`` rebuild the policy a user wrote: as data, never as pickled code.
    The factory is called as::

        factory(observation_space, action_space, **kwargs) -> torch.nn.Module

    with the env's single observation and action spaces, and returns a freshly
    initialised policy on the CPU (a class whose constructor takes these
    arguments is a factory too: ``typedrl.policies:MLPActorCritic``). The
    trainer loads the saved weights into it.

    Args:
        target: ``"package.module:function"``, importable wherever the run is
            evaluated or resumed (the attribute may be dotted:
            ``"module:Class.build"``).
        kwargs: JSON-like keyword arguments (``str``, ``int``, ``float``,
            ``bool``, ``None``, lists and ``str``-keyed dicts).

    Raises:
        ConfigError: ``target`` is not of the form ``module:attribute``, or a
            keyword argument is not JSON-like.

    Example:
        >>> import gymnasium as gym
        >>> factory = PolicyFactory(
        ...     "typedrl.policies:MLPActorCritic", kwargs={"actor_hidden": [16]}
        ... )
        >>> policy = factory.build(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2))
        >>> type(policy).__name__, factory.to_dict()["target"]
        ('MLPActorCritic', 'typedrl.policies:MLPActorCritic')
        >>> PolicyFactory("my_pkg.nets.make_policy")
        Traceback (most recent call last):
        ...
        typedrl.errors.ConfigError: PolicyFactory.target must be 'package.module:function', \
got 'my_pkg.nets.make_policy'
    """

    target: str
    """``"package.module:function"``."""
    kwargs: Mapping[str, Any] = field(default_factory=dict, kw_only=True)
    """Keyword arguments of the factory, JSON-like."""

    def __post_init__(self) -> None:
        target: object = self.target
        if type(target) is not str or _TARGET.match(target) is None:
            got = repr(target) if type(target) is str else describe(target)
            raise ConfigError(f"PolicyFactory.target must be 'package.module:function', got {got}")
        if not isinstance(self.kwargs, Mapping):
            raise ConfigError(
                f"PolicyFactory.kwargs must be a mapping of names to JSON-like values, got "
                f"{describe(self.kwargs)}"
            )
        kwargs = dict(self.kwargs)
        json_like("PolicyFactory.kwargs", kwargs)
        object.__setattr__(self, "kwargs", kwargs)

    def resolve(self) -> Callable[..., object]:
        """Import the factory.

        Raises:
            ConfigError: The module cannot be imported, lacks the attribute, or
                the attribute is not callable.
        """
        module_name, _, attribute = self.target.partition(":")
        try:
            found: object = importlib.import_module(module_name)
        except ImportError as error:
            raise ConfigError(
                f"policy factory {self.target}: cannot import {module_name} ({error}); make "
                "the module importable (install its package, or add its folder to PYTHONPATH)"
            ) from None
        for part in attribute.split("."):
            if not hasattr(found, part):
                raise ConfigError(
                    f"policy factory {self.target}: {module_name} has no attribute {attribute!r}"
                )
            found = getattr(found, part)
        if not callable(found):
            raise ConfigError(f"policy factory {self.target}: {describe(found)} is not callable")
        return found

    def build(self, observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> nn.Module:
        """Call the factory: ``factory(observation_space, action_space, **kwargs)``.

        Raises:
            ConfigError: The factory cannot be imported, raises a ``TypeError``
                or ``ValueError`` (wrong keyword arguments, say), or returns
                something else than a :class:`torch.nn.Module`.
        """
        factory = self.resolve()
        try:
            policy = factory(observation_space, action_space, **self.kwargs)
        except (TypeError, ValueError) as error:
            raise ConfigError(
                f"policy factory {self.target} with kwargs {dict(self.kwargs)} raised "
                f"{type(error).__name__}: {error}"
            ) from error
        if not isinstance(policy, nn.Module):
            raise ConfigError(
                f"policy factory {self.target} must return a torch.nn.Module, got "
                f"{describe(policy)}"
            )
        return policy

    def to_dict(self) -> dict[str, Any]:
        """The factory as JSON-like values: ``{"target": ..., "kwargs": {...}}``."""
        return {"target": self.target, "kwargs": _copy(self.kwargs)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "policy") -> "PolicyFactory":
        """Read :meth:`to_dict`'s form (a checkpoint's, a ``config.yaml``'s ``policy:``).

        Raises:
            ConfigError: ``data`` is not a mapping with ``target`` and optional
                ``kwargs`` (``where`` names it), or holds invalid values.
        """
        if not isinstance(data, Mapping):
            raise ConfigError(
                f"{where} must be a mapping with 'target' and 'kwargs', got {describe(data)}"
            )
        unknown = sorted(str(key) for key in data if key not in ("target", "kwargs"))
        if unknown or "target" not in data:
            raise ConfigError(
                f"{where} must be a mapping with 'target' (package.module:function) and "
                f"optionally 'kwargs'; got keys {sorted(map(str, data))}"
            )
        kwargs = data.get("kwargs")
        try:
            return cls(data["target"], kwargs={} if kwargs is None else kwargs)
        except ConfigError as error:
            raise ConfigError(f"{where}: {error}") from None


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value
