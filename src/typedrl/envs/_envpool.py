"""EnvPool's batched envs as an env spec: ``typedrl train typedrl.envs:make_envpool``."""

import importlib
from typing import Any

import gymnasium as gym

from typedrl._validation import non_negative_int
from typedrl.errors import MissingDependencyError

__all__ = ["make_envpool"]

_SEED_RANGE = 2**31
"""EnvPool keeps its seed in an ``int32``."""


def make_envpool(
    task_id: str, *, num_envs: int, seed: int | None = None, **kwargs: Any
) -> gym.vector.VectorEnv[Any, Any, Any]:
    """``num_envs`` rows of EnvPool's ``task_id``, a Gymnasium vector env, seeded at creation.

    EnvPool steps many envs in C++ threads and applies its own
    preprocessing (its Atari tasks: 84x84 grayscale frames, 4 stacked, 4
    frames skipped, up to 30 no-ops at reset); ``kwargs`` are its options
    (``episodic_life=True``, ``reward_clip=True``, ``stack_num``,
    ``img_height``, ...). Its envs autoreset on the step after an episode
    ends, which :class:`~typedrl.envs.GymnasiumVecEnv` adapts. EnvPool takes
    its seed when the env is built and ignores ``reset(seed=...)``, so the
    run's seed is given here, folded below ``2**31``, and the returned env's
    ``reset`` takes a seed without passing it on (EnvPool would warn that it
    ignores it on every run).

    From the command line: ``typedrl train typedrl.envs:make_envpool
    --env-kwargs task_id=Pong-v5`` (see the Atari guide).

    From Python: ``make("typedrl.envs:make_envpool", num_envs=8, seed=0,
    env_kwargs={"task_id": "Pong-v5"})``.

    Raises:
        MissingDependencyError: EnvPool is not installed.
    """
    try:
        envpool = importlib.import_module("envpool")
    except ImportError as error:
        raise MissingDependencyError(
            f"make_envpool({task_id!r}) needs EnvPool: pip install envpool"
        ) from error
    folded = 0 if seed is None else non_negative_int("make_envpool", "seed", seed) % _SEED_RANGE
    return _SeededAtCreation(
        envpool.make_gymnasium(task_id, num_envs=num_envs, seed=folded, **kwargs)
    )


class _SeededAtCreation(gym.vector.VectorWrapper[Any, Any, Any]):
    """An EnvPool env whose ``reset`` drops the seed: the env took its seed when it was built."""

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every row; ``seed`` is ignored (given to EnvPool when the env was built)."""
        del seed
        return self.env.reset(options=options)
