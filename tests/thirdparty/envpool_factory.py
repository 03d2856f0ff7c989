"""A vector factory of EnvPool's CartPole, as a user writes one (EnvPool builds whole batches).

EnvPool is imported when the factory is called: only ``nox -s thirdparty`` installs it, and
this module is imported by the default test run's doctest collection too.
"""

import importlib
from typing import Any


def cartpole(*, num_envs: int, seed: int | None = None) -> Any:
    """``num_envs`` rows of EnvPool's CartPole-v1, seeded at creation (EnvPool's rule).

    typedrl passes a seed below ``2**32``; EnvPool keeps it in an ``int32``.
    """
    envpool = importlib.import_module("envpool")
    return envpool.make_gymnasium(
        "CartPole-v1", num_envs=num_envs, seed=0 if seed is None else seed % 2**31
    )
