# Partial stubs for MuJoCo (mujoco) 3.5.0: the model-loading surface that
# typedrl.envs.mujoco uses. Every other name resolves to ``Incomplete``
# (typeshed partial-module style).
import numpy as np
from _typeshed import Incomplete
from numpy.typing import NDArray

class MjOption:
    timestep: float
    iterations: int
    ls_iterations: int
    integrator: int
    disableflags: int

class MjModel:
    nq: int
    nv: int
    nu: int
    na: int
    opt: MjOption
    qpos0: NDArray[np.float64]
    actuator_ctrlrange: NDArray[np.float64]
    actuator_ctrllimited: NDArray[np.uint8]
    @staticmethod
    def from_xml_path(filename: str) -> MjModel: ...
    @staticmethod
    def from_xml_string(xml: str) -> MjModel: ...

def __getattr__(name: str) -> Incomplete: ...
