"""On-policy agents on the trainer core: PPO, its config and the on-policy collector."""

from typedrl.agents._collector import OnPolicyCollector as OnPolicyCollector
from typedrl.agents._collector import OnPolicyRollout as OnPolicyRollout
from typedrl.agents._compiled_update import AUTO_COMPILE_MIN_UPDATES as AUTO_COMPILE_MIN_UPDATES
from typedrl.agents._compiled_update import CompileDecision as CompileDecision
from typedrl.agents._config import PPOConfig as PPOConfig
from typedrl.agents._ppo import PPOAgent as PPOAgent

__all__ = [
    "AUTO_COMPILE_MIN_UPDATES",
    "CompileDecision",
    "OnPolicyCollector",
    "OnPolicyRollout",
    "PPOAgent",
    "PPOConfig",
]
