"""typedrl.envs.make_envpool without EnvPool: one line naming the package (the default suite).

The env itself is tested where EnvPool is installed: ``tests/thirdparty/test_images.py``.
"""

import sys

import pytest

from typedrl.envs import make, make_envpool
from typedrl.errors import ConfigError, MissingDependencyError


def test_without_envpool_the_error_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import envpool`` failing is a MissingDependencyError, through make() too."""
    monkeypatch.setitem(sys.modules, "envpool", None)  # the next import raises ImportError
    with pytest.raises(MissingDependencyError, match=r"needs EnvPool: pip install envpool"):
        make_envpool("Pong-v5", num_envs=2, seed=0)
    with pytest.raises(MissingDependencyError, match=r"make_envpool\('CartPole-v1'\)"):
        make("typedrl.envs:make_envpool", num_envs=2, env_kwargs={"task_id": "CartPole-v1"})


def test_a_negative_seed_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The seed is checked before EnvPool is asked for anything."""
    monkeypatch.setitem(sys.modules, "envpool", object())
    with pytest.raises(ConfigError, match=r"make_envpool\.seed must be a non-negative int"):
        make_envpool("Pong-v5", num_envs=2, seed=-1)
