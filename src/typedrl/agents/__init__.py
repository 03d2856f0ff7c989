"""On-policy agents on the trainer core: PPO's trainer, its algorithm, config and collector."""

from typing import TYPE_CHECKING

from typedrl._lazy import lazy_exports

# Submodules load on first use: reading PPOConfig (the command does, to parse a
# config) imports neither torch nor Lightning.
if TYPE_CHECKING:
    from typedrl.agents._algorithm import PPO as PPO
    from typedrl.agents._collector import OnPolicyCollector as OnPolicyCollector
    from typedrl.agents._collector import OnPolicyRollout as OnPolicyRollout
    from typedrl.agents._compiled_update import (
        AUTO_BACKGROUND_MIN_UPDATES as AUTO_BACKGROUND_MIN_UPDATES,
    )
    from typedrl.agents._compiled_update import (
        AUTO_COMPILE_MIN_UPDATES as AUTO_COMPILE_MIN_UPDATES,
    )
    from typedrl.agents._compiled_update import (
        AUTO_COMPILE_MIN_UPDATES_WARM as AUTO_COMPILE_MIN_UPDATES_WARM,
    )
    from typedrl.agents._compiled_update import (
        PRECOMPILED_LOAD_SECONDS as PRECOMPILED_LOAD_SECONDS,
    )
    from typedrl.agents._compiled_update import CompileDecision as CompileDecision
    from typedrl.agents._compiled_update import CompileRecord as CompileRecord
    from typedrl.agents._compiled_update import UpdateTiming as UpdateTiming
    from typedrl.agents._compiled_update import (
        wait_for_background_precompile as wait_for_background_precompile,
    )
    from typedrl.agents._config import PPOConfig as PPOConfig
    from typedrl.agents._ppo import PPOAgent as PPOAgent
else:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "PPO": "typedrl.agents._algorithm",
            "OnPolicyCollector": "typedrl.agents._collector",
            "OnPolicyRollout": "typedrl.agents._collector",
            "AUTO_BACKGROUND_MIN_UPDATES": "typedrl.agents._compiled_update",
            "AUTO_COMPILE_MIN_UPDATES": "typedrl.agents._compiled_update",
            "AUTO_COMPILE_MIN_UPDATES_WARM": "typedrl.agents._compiled_update",
            "CompileDecision": "typedrl.agents._compiled_update",
            "CompileRecord": "typedrl.agents._compiled_update",
            "PRECOMPILED_LOAD_SECONDS": "typedrl.agents._compiled_update",
            "UpdateTiming": "typedrl.agents._compiled_update",
            "wait_for_background_precompile": "typedrl.agents._compiled_update",
            "PPOConfig": "typedrl.agents._config",
            "PPOAgent": "typedrl.agents._ppo",
        },
    )

__all__ = [
    "AUTO_BACKGROUND_MIN_UPDATES",
    "AUTO_COMPILE_MIN_UPDATES",
    "AUTO_COMPILE_MIN_UPDATES_WARM",
    "PPO",
    "PRECOMPILED_LOAD_SECONDS",
    "CompileDecision",
    "CompileRecord",
    "OnPolicyCollector",
    "OnPolicyRollout",
    "PPOAgent",
    "PPOConfig",
    "UpdateTiming",
    "wait_for_background_precompile",
]
