"""On-policy agents on the trainer core: PPO's trainer, its algorithm, config and collector."""

from typing import TYPE_CHECKING

from typedrl._lazy import lazy_exports

# Submodules load on first use: reading PPOConfig (the command does, to parse a
# config) imports neither torch nor Lightning.
if TYPE_CHECKING:
    from typedrl.agents._algorithm import PPO as PPO
    from typedrl.agents._collector import OnPolicyCollector as OnPolicyCollector
    from typedrl.agents._collector import OnPolicyRollout as OnPolicyRollout
    from typedrl.agents._config import PPOConfig as PPOConfig
    from typedrl.agents._ppo import PPOAgent as PPOAgent
else:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "PPO": "typedrl.agents._algorithm",
            "OnPolicyCollector": "typedrl.agents._collector",
            "OnPolicyRollout": "typedrl.agents._collector",
            "PPOConfig": "typedrl.agents._config",
            "PPOAgent": "typedrl.agents._ppo",
        },
    )

__all__ = [
    "PPO",
    "OnPolicyCollector",
    "OnPolicyRollout",
    "PPOAgent",
    "PPOConfig",
]
