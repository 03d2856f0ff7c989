# Partial stubs for Isaac Lab (isaaclab) develop @ 3079fec2 (Isaac Lab 3.0 line, after
# isaac-sim/IsaacLab#6219), env surface only.
#
# Only ``isaaclab.envs`` is stubbed, and only the part an RL adapter needs. Every other
# name in the top-level package resolves to ``Incomplete`` (typeshed partial-module style).
from _typeshed import Incomplete

def __getattr__(name: str) -> Incomplete: ...
