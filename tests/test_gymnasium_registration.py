"""Registration of the typedrl/ ids on ``import typedrl``."""

import json
import subprocess
import sys

import gymnasium as gym
import pytest

import typedrl
from typedrl._gymnasium_registration import (
    BUILTIN_ENV_IDS,
    ENTRY_POINTS_MODULE,
    register_builtin_envs,
)


def _run(code: str) -> object:
    """Run ``code`` in a fresh interpreter; return the JSON its last line prints."""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_import_typedrl_registers_every_id_without_torch() -> None:
    """``import typedrl`` alone registers the ids; torch loads only when an env is built."""
    code = (
        "import json, sys\n"
        "import typedrl\n"
        "import gymnasium as gym\n"
        "spec = gym.spec('typedrl/Pendulum-v0')\n"
        "print(json.dumps([spec.entry_point, 'torch' in sys.modules]))"
    )
    assert _run(code) == [f"{ENTRY_POINTS_MODULE}:Pendulum", False]


def test_ids_registered_when_gymnasium_comes_first() -> None:
    """import gymnasium, then import typedrl: the ids are there at once."""
    code = (
        "import json, sys\n"
        "import gymnasium as gym\n"
        "import typedrl\n"
        "print(json.dumps(['typedrl/CartPole-v0' in gym.registry, 'torch' in sys.modules]))"
    )
    assert _run(code) == [True, False]


@pytest.mark.slow  # the fresh interpreter imports torch and typedrl.envs
def test_gymnasium_alone_builds_with_the_module_prefix() -> None:
    """Gymnasium has no plugin hook; its "module:id" form imports typedrl, which registers."""
    code = (
        "import json\n"
        "import gymnasium as gym\n"
        "before = 'typedrl/Pendulum-v0' in gym.registry\n"
        "env = gym.make('typedrl:typedrl/Pendulum-v0')\n"
        "obs, _ = env.reset(seed=0)\n"
        "print(json.dumps([before, obs.shape[0]]))"
    )
    assert _run(code) == [False, 3]


def test_registration_in_this_process() -> None:
    """Here typedrl is imported: every id is registered; asking again changes nothing."""
    specs = {env_id: gym.spec(env_id) for env_id in BUILTIN_ENV_IDS}
    register_builtin_envs()
    assert all(gym.spec(env_id) is specs[env_id] for env_id in BUILTIN_ENV_IDS)
    assert typedrl.__version__
