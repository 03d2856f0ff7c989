"""On-policy agents on Lightning Fabric: the abstract lifecycle and PPO."""

from typedrl.agents._base import BaseAgent as BaseAgent
from typedrl.agents._base import FitResult as FitResult
from typedrl.agents._config import PPOConfig as PPOConfig
from typedrl.agents._ppo import PPOAgent as PPOAgent

__all__ = ["BaseAgent", "FitResult", "PPOAgent", "PPOConfig"]
