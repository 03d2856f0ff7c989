"""Vector factories that take the env options through ``**options`` (string annotations)."""

from __future__ import annotations

from typing import Unpack

import typing_extensions

from typedrl.envs import EnvOptions, Pendulum


def pendulum(*, num_envs: int, **options: Unpack[EnvOptions]) -> Pendulum:
    """A Pendulum; ``typing.Unpack`` as a string annotation."""
    return Pendulum(num_envs=num_envs, **options)


def pendulum_te(*, num_envs: int, **options: typing_extensions.Unpack[EnvOptions]) -> Pendulum:
    """A Pendulum; ``typing_extensions.Unpack`` as a string annotation."""
    return Pendulum(num_envs=num_envs, **options)
