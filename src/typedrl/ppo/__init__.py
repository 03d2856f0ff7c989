"""PPO on the trainer core: its trainer, its algorithm, config and on-policy collector."""

from typing import TYPE_CHECKING

from typedrl._lazy import lazy_exports

# Submodules load on first use: reading PPOConfig (the command does, to parse a
# config) imports neither torch nor Lightning.
if TYPE_CHECKING:
    from typedrl.ppo._algorithm import PPO as PPO
    from typedrl.ppo._collector import OnPolicyCollector as OnPolicyCollector
    from typedrl.ppo._collector import OnPolicyRollout as OnPolicyRollout
    from typedrl.ppo._config import PPOConfig as PPOConfig
    from typedrl.ppo._ppo import PPOAgent as PPOAgent
else:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "PPO": "typedrl.ppo._algorithm",
            "OnPolicyCollector": "typedrl.ppo._collector",
            "OnPolicyRollout": "typedrl.ppo._collector",
            "PPOConfig": "typedrl.ppo._config",
            "PPOAgent": "typedrl.ppo._ppo",
        },
    )

__all__ = [
    "PPO",
    "OnPolicyCollector",
    "OnPolicyRollout",
    "PPOAgent",
    "PPOConfig",
]
