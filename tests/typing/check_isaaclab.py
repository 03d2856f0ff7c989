"""Static type tests of the Isaac Lab adapter, checked by mypy and never executed.

The real Isaac Lab classes (from the stubs in ``typings/isaaclab``) and the
fakes satisfy :class:`IsaacLabEnvLike`; a class without the RL surface is
rejected. Each expected error carries a coded ``type: ignore[...]``: mypy runs
with ``warn_unused_ignores``, so the check fails if an expected error ever
disappears.
"""

from typing import assert_type

import gymnasium as gym
import torch
from isaaclab.envs import DirectRLEnv, ManagerBasedEnv, ManagerBasedRLEnv

from typedrl.envs._isaaclab import IsaacLabEnvLike, IsaacLabVecEnv
from typedrl.protocols import StepResult, VecEnv
from typedrl.testing._isaaclab_fake import FakeDirectRLEnv, FakeManagerBasedRLEnv


def takes_isaaclab_env(env: IsaacLabEnvLike) -> None:
    """Accept anything with the Isaac Lab RL surface."""


def takes_vec_env(env: VecEnv) -> None:
    """Accept any typedrl vector env."""


def upstream_classes_conform(manager: ManagerBasedRLEnv, direct: DirectRLEnv) -> None:
    takes_isaaclab_env(manager)
    takes_isaaclab_env(direct)
    takes_vec_env(IsaacLabVecEnv(manager))
    takes_vec_env(IsaacLabVecEnv(direct, clip_actions=1.0, final_obs="required"))


def fakes_conform(manager: FakeManagerBasedRLEnv, direct: FakeDirectRLEnv) -> None:
    takes_isaaclab_env(manager)
    takes_isaaclab_env(direct)
    env = IsaacLabVecEnv(manager, clip_actions="space")
    assert_type(env.single_observation_space, gym.spaces.Dict)
    assert_type(env.single_action_space, gym.spaces.Box)
    assert_type(env.step(torch.zeros(env.num_envs, 2)), StepResult)
    assert_type(env.env, IsaacLabEnvLike)


def wrong_classes_are_rejected(base: ManagerBasedEnv) -> None:
    # ManagerBasedEnv has no RL step (it returns a 2-tuple), no RL cfg and no spaces.
    takes_isaaclab_env(base)  # type: ignore[arg-type]
    IsaacLabVecEnv(base)  # type: ignore[arg-type]


def wrong_options_are_rejected(manager: ManagerBasedRLEnv) -> None:
    IsaacLabVecEnv(manager, final_obs="always")  # type: ignore[arg-type]
    IsaacLabVecEnv(manager, clip_actions="bounds")  # type: ignore[arg-type]
    IsaacLabVecEnv(manager, 1.0)  # type: ignore[call-arg]
