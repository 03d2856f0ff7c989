# Partial stubs for newton 1.8.0 (Newton physics on NVIDIA Warp): the classes that
# typedrl.envs.newton names in annotations. typedrl calls newton through the module
# object it imports at run time, so only these names are declared; every other name
# resolves to ``Incomplete`` (typeshed partial-module style).
from _typeshed import Incomplete

class Model:
    def __getattr__(self, name: str) -> Incomplete: ...

class State:
    def __getattr__(self, name: str) -> Incomplete: ...

class Control:
    def __getattr__(self, name: str) -> Incomplete: ...

class Contacts:
    def __getattr__(self, name: str) -> Incomplete: ...

def __getattr__(name: str) -> Incomplete: ...
