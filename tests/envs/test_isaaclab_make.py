"""Tests for typedrl.envs._isaaclab.make_isaaclab and make()'s Isaac Lab branch without Isaac Lab.

The real tasks are exercised by ``nox -s isaaclab`` (tests_isaaclab/); these check what
happens before Isaac Lab is imported, and the error when it cannot be imported.
"""

import sys
from typing import Any

import pytest

from typedrl.envs import _isaaclab, make
from typedrl.envs._isaaclab import make_isaaclab
from typedrl.errors import ConfigError, MissingDependencyError


def test_missing_isaaclab_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without Isaac Lab, make() raises MissingDependencyError with the install command."""
    # A None entry makes the import fail whether or not Isaac Lab is installed.
    monkeypatch.setitem(sys.modules, "isaaclab_tasks", None)
    with pytest.raises(MissingDependencyError, match=r"needs Isaac Lab.*isaaclab==3\.0\.0"):
        make("Isaac-Cartpole", num_envs=2)


@pytest.mark.parametrize(
    "options",
    [
        {"vectorization": "async"},
        {"wrappers": [lambda env: env]},
        {"float_dtype": "float64"},
    ],
)
def test_make_rejects_options_that_do_not_apply(options: dict[str, Any]) -> None:
    """Gymnasium-only options are a ConfigError for Isaac Lab ids."""
    with pytest.raises(ConfigError, match="Isaac Lab envs are batched"):
        make("Isaac-Cartpole", num_envs=2, **options)


@pytest.mark.parametrize(
    ("env_kwargs", "match"),
    [
        ({"physics": "newton"}, r"unknown env_kwargs \['physics'\]"),
        ({"overrides": "physics=newton_mjwarp"}, r"must be a list of 'key=value' strings"),
        ({"overrides": [1]}, r"must be a list of 'key=value' strings"),
        ({"compute_final_obs": 1}, r"compute_final_obs'\] must be a bool"),
        ({"is_finite_horizon": "yes"}, r"is_finite_horizon'\] must be None or a bool"),
        ({"cfg_hook": 3}, r"cfg_hook'\] must be a callable"),
    ],
)
def test_bad_env_kwargs(env_kwargs: dict[str, Any], match: str) -> None:
    """Options are checked, with the key and the value, before Isaac Lab is imported."""
    with pytest.raises(ConfigError, match=match):
        make_isaaclab("Isaac-Cartpole", num_envs=2, env_kwargs=env_kwargs)


def test_bad_num_envs() -> None:
    """num_envs must be a positive int."""
    with pytest.raises(ConfigError, match="num_envs must be a positive int"):
        make_isaaclab("Isaac-Cartpole", num_envs=0)


def test_overrides_come_from_env_kwargs_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment is not read: a variable of the old name changes nothing."""
    monkeypatch.setenv("TYPEDRL_ISAACLAB_OVERRIDES", "env.scene.ground='null")
    assert _isaaclab._overrides({}, "make_isaaclab") == []
    assert _isaaclab._overrides({"overrides": ["a=b"]}, "make_isaaclab") == ["a=b"]
