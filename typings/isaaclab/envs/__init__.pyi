# Partial stubs for Isaac Lab (isaaclab) develop @ 3079fec2 (Isaac Lab 3.0 line, after
# isaac-sim/IsaacLab#6219), env surface only.
#
# Upstream ``isaaclab/envs/__init__.py`` exports many more names (DirectMARLEnv,
# ManagerBasedMARLEnv, ViewerCfg, mdp, ...). They are deliberately absent here, and there is
# no module ``__getattr__``, so a misspelt import of the names below is still an error.
from .common import VecEnvObs as VecEnvObs
from .common import VecEnvStepReturn as VecEnvStepReturn
from .direct_rl_env import DirectRLEnv as DirectRLEnv
from .direct_rl_env_cfg import DirectRLEnvCfg as DirectRLEnvCfg
from .manager_based_env import ManagerBasedEnv as ManagerBasedEnv
from .manager_based_env_cfg import ManagerBasedEnvCfg as ManagerBasedEnvCfg
from .manager_based_rl_env import ManagerBasedRLEnv as ManagerBasedRLEnv
from .manager_based_rl_env_cfg import ManagerBasedRLEnvCfg as ManagerBasedRLEnvCfg
