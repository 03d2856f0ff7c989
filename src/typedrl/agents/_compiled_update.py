"""``compile_update``: a whole PPO minibatch update as one compiled function.

For small networks on a CPU, a minibatch update is dominated by per-call
overhead: the autograd engine walking the backward graph, gradient
accumulation, the optimizer's bookkeeping around its kernel. Here the loss,
its gradients (:func:`torch.func.grad`, traced into the same graph as the
forward pass), the global gradient-norm clipping and Adam's update are one
function handed to :func:`torch.compile`.

The update is Adam's (Kingma and Ba, 2015) exactly as :class:`torch.optim.Adam`
computes it without weight decay, AMSGrad or maximisation, on the optimizer's
own state tensors (``step``, ``exp_avg``, ``exp_avg_sq``, created as the
optimizer creates them), so checkpoints are interchangeable with eager runs;
values agree with the eager update to floating-point rounding. A minibatch
with a non-finite gradient norm changes nothing (parameters, moments and
step count keep their values), without a host synchronisation.

``PPOConfig(compile_update="auto")`` compiles only where it pays
(:func:`decide_compile`): a single process in 32-true or 64-true precision, a
C++ compiler where inductor looks for one (:func:`find_cpp_compiler`), no
runtime shape checking, and a planned number of minibatch updates that
amortises the compile time: :data:`AUTO_COMPILE_MIN_UPDATES` on a cold
compile cache; when this machine has compiled the same update before
(:class:`CompileRecord`), the break-even of what the precompiled update
was measured to save per minibatch here (:class:`UpdateTiming`), or
:data:`AUTO_COMPILE_MIN_UPDATES_WARM` where nothing was measured.

Compiled code is cached by torch itself (inductor's FX-graph and AOTAutograd
caches, in ``TORCHINDUCTOR_CACHE_DIR``, by default a folder under the
system's temporary directory), so a second run with the same network and
minibatch shape compiles in seconds. Point ``TORCHINDUCTOR_CACHE_DIR`` at a
folder that persists (a cluster's ``/tmp`` may be wiped between jobs) to keep
that across runs.

Where torch can (``torch.compile(...).aot_compile``, torch 2.10 and later),
the update is also *precompiled*: traced once, saved beside the compile record
(:meth:`CompileRecord.precompiled_path`) and loaded by the next run in about
a second on a CPU (most of it importing inductor's runtime), without tracing
the Python code again. A precompiled
update checks none of its inputs when called (no guards, which also saves
their cost on every call), so its file is named by everything the traced
graph depends on: torch's version, the source of the whole typedrl package,
the config's loss settings, Adam's betas and epsilon, the spaces, every
parameter's and buffer's name, shape, dtype and device, the minibatch's
rows, whether it carries a validity mask, and inductor's vector-ISA setting.
Only :class:`~typedrl.policies.MLPActorCritic` itself is precompiled (a
subclass's code is not in the key); a file that cannot be read, loaded or
written, or a torch without the API, falls back to the in-process compile.

A run that ``"auto"`` keeps eager on a cold cache, with at least
:data:`AUTO_BACKGROUND_MIN_UPDATES` planned updates, precompiles its update
in the background (:func:`start_background_precompile`): a child process at
low priority, one at a time per cache folder, builds the same update from
the run's first minibatch, saves it, and times it against the eager update
(:func:`measure_update`), so that the machine's next such run loads it
where that measurement says it pays. The run itself stays eager
throughout. ``TYPEDRL_BACKGROUND_COMPILE=0`` turns it off.
"""

import contextlib
import dataclasses
import functools
import hashlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TypeGuard, final

import gymnasium as gym
import tensordict
import torch
import torch._inductor.config
from tensordict import TensorDict
from torch import Tensor, nn

from typedrl._atomic import write_text_atomically
from typedrl.agents._config import PPOConfig
from typedrl.agents._loss import EpochData, ppo_loss
from typedrl.agents._precompile_worker import write_spec
from typedrl.distributed import SingleProcess
from typedrl.errors import ConfigError
from typedrl.policies import MLPActorCritic
from typedrl.training import GradientStep

__all__ = [
    "AUTO_BACKGROUND_MIN_UPDATES",
    "AUTO_COMPILE_MIN_UPDATES",
    "AUTO_COMPILE_MIN_UPDATES_WARM",
    "BACKGROUND_COMPILE_VARIABLE",
    "COMPILE_SECONDS_MEASURED",
    "PRECOMPILED_LOAD_SECONDS",
    "CompileDecision",
    "CompileRecord",
    "CompiledUpdate",
    "UpdateTiming",
    "decide_compile",
    "find_cpp_compiler",
    "measure_update",
    "precompile_supported",
    "runtime_checks_active",
    "start_background_precompile",
    "trust_checked_vector_isa",
    "vector_isa_machine",
    "wait_for_background_precompile",
]

_AdamState = tuple[Tensor, Tensor, Tensor]

AUTO_COMPILE_MIN_UPDATES = 100_000
"""Planned minibatch updates from which ``compile_update="auto"`` compiles.

Measured with ``benchmarks/ppo_compile_break_even.py`` on one CPU thread of a
loaded 2-core machine: compiling took 50-60 s and saved 0.66 ms per update on
CartPole-v1 ([64, 64] tanh, batches of 64; break-even after 78,000 updates)
and 0.52 ms on HalfCheetah-v5 ([256, 256] ReLU, batches of 64; after 112,000).
With batches of 512 on the HalfCheetah networks the compiled update was slower
than the eager one; such runs plan far fewer updates (see the PPO guide)."""

AUTO_COMPILE_MIN_UPDATES_WARM = 2_000
"""Planned minibatch updates from which ``"auto"`` compiles on a warm cache.

Measured with ``benchmarks/ppo_compile_break_even.py`` twice on one CPU thread
of a quiet 2-core machine, the second time on the first one's cache: loading
the precompiled update (a fresh process's first use of inductor included)
took 1.0-1.2 s, and it saved 0.94-1.02 ms per update on CartPole-v1 ([64, 64]
tanh, batches of 64), 0.74 ms on HalfCheetah-v5 ([256, 256] ReLU, batches of
64) and 0.85 ms with batches of 512 there. A warm load pays after 1,200-1,600
updates; the threshold is the upper end, rounded up, as
:data:`AUTO_COMPILE_MIN_UPDATES` is of the cold break-even. (Before updates
were precompiled, a warm compile took 1.9 s and saved 0.39-0.77 ms: 5,000.)"""

AUTO_BACKGROUND_MIN_UPDATES = 200
"""Planned minibatch updates from which an eager ``"auto"`` run on a cold cache
precompiles its update in the background (:func:`start_background_precompile`).

Below the warm threshold on purpose: the child measures what the compiled
update saves per minibatch (:class:`UpdateTiming`), and the machine's next run
decides from that measurement. Large minibatches save milliseconds per update
(the built-in CartPole with rsl_rl's settings: 16,384 rows, 20 updates per
epoch), so a few hundred updates can pay for a load. Shorter plans take a few
seconds of updates and start nothing."""

PRECOMPILED_LOAD_SECONDS = 1.5
"""The cost ``"auto"`` assumes for loading a precompiled update until this
machine has measured one (:meth:`CompileRecord.load_seconds`): loads took
1.0-1.2 s on one CPU thread of a 2-core machine, most of it importing
inductor's runtime."""

COMPILE_SECONDS_MEASURED = "50-60 s on one CPU thread"
"""How long compiling one minibatch size took where it was measured (see
:data:`AUTO_COMPILE_MIN_UPDATES`); the console message quotes it."""


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CompileDecision:
    """Whether a run compiles its minibatch updates, and why."""

    enabled: bool
    """Compile the minibatch update or run it eagerly."""
    reason: str
    """What decided it, for logs and errors."""


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class UpdateTiming:
    """What a precompiled update saves on this machine, as measured when it was compiled.

    The background compile (``start_background_precompile`` in
    ``typedrl.agents._compiled_update``) times the compiled update and the
    eager one on the run's first minibatch, in turn, and keeps the fastest of
    several blocks of calls of each (``measure_update``, there).
    """

    eager_ms: float
    """Milliseconds of one eager minibatch update (loss, backward, clipping, Adam)."""
    compiled_ms: float
    """Milliseconds of one call of the compiled update."""
    load_seconds: float | None = None
    """Seconds the last load of the precompiled file took in a run (``None``: none yet)."""

    def break_even(self) -> int | None:
        """Planned updates from which loading the precompiled update pays.

        ``ceil(load seconds / seconds saved per update)``, with
        :data:`PRECOMPILED_LOAD_SECONDS` until a load has been measured (or
        where the recorded one is not a positive, finite number). ``None``
        where the compiled update was measured no faster.
        """
        saved_s = (self.eager_ms - self.compiled_ms) / 1e3
        if not 0.0 < saved_s < math.inf:
            return None
        load = self.load_seconds
        if load is None or not 0.0 < load < math.inf:
            load = PRECOMPILED_LOAD_SECONDS
        return max(1, math.ceil(load / saved_s))

    def describe(self) -> str:
        """``measured 6.10 ms compiled against 10.20 ms eager`` (for the decision's reason)."""
        return f"measured {self.compiled_ms:.2f} ms compiled against {self.eager_ms:.2f} ms eager"


def find_cpp_compiler(names: Sequence[str | None] | str | None = None) -> str | None:
    """The path of the C++ compiler inductor would use, or ``None`` when there is none.

    Inductor tries the names in ``torch._inductor.config.cpp.cxx`` in order (by
    default ``$CXX`` or ``g++``); a ``None`` entry stands for a compiler it
    would install on demand, which a run never does, so it is skipped.

    Args:
        names: The names to try instead of inductor's (for tests).
    """
    search = torch._inductor.config.cpp.cxx if names is None else names
    for name in (search,) if isinstance(search, str) else search:
        if name is None:
            continue
        path = shutil.which(name)
        if path is not None:
            return path
    return None


_RECORD_FILE = "typedrl-compiled-updates.json"

_RecordValue = float | str | dict[str, float]
"""A record entry: seconds of a compile or load, a vector ISA, or an update's timing."""


def _is_number(value: object) -> TypeGuard[int | float]:
    """An int or float that is not a bool (JSON's ``true`` reads as ``True``, an int)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _read_timing(value: object) -> dict[str, float] | None:
    """A recorded timing, ``{"eager_ms", "compiled_ms"}``, both finite and positive."""
    if not isinstance(value, Mapping):
        return None
    numbers: dict[str, float] = {}
    for name in ("eager_ms", "compiled_ms"):
        part = value.get(name)
        if not _is_number(part) or not 0.0 < float(part) < math.inf:
            return None
        numbers[name] = float(part)
    return numbers


@final
class CompileRecord:
    """Which PPO updates this machine has compiled, beside torch's compile cache.

    A key names one compiled update: the torch and typedrl code that traces
    it, the network and its spaces, the loss settings and the minibatch size.
    The record is a JSON file in inductor's cache folder, so wiping that
    cache forgets the record too. It is an estimate: torch may still miss its
    cache (another inductor setting, another compiler), which costs one cold
    compile and nothing else. A record that cannot be read or written is
    ignored.

    Args:
        folder: Where the record lives; ``None``: inductor's cache folder.
    """

    def __init__(self, folder: Path | None = None) -> None:
        if folder is None:
            from torch._inductor.runtime.cache_dir_utils import (  # noqa: PLC0415
                default_cache_dir,
            )

            # inductor's folder, read without creating it (a write creates it).
            folder = Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR") or default_cache_dir())
        self.path: Final = folder / _RECORD_FILE
        """The record's file."""

    @staticmethod
    def key(
        config: PPOConfig,
        spaces: object,
        minibatch_rows: int,
        *,
        dtype: torch.dtype = torch.float32,
        device: str = "cpu",
    ) -> str:
        """The key of the update ``config`` compiles for ``spaces`` and ``minibatch_rows``.

        ``dtype`` is the policy's (``torch.float64`` under Fabric's 64-true
        precision), ``device`` the type of its device (``"cpu"``, ``"cuda"``).
        The key also covers torch's version, the source of the typedrl
        package and, on a CPU, torch's thread count (written into compiled
        CPU kernels, and into what an update's measured timing means).
        """
        digest = hashlib.sha256(torch.__version__.encode())
        digest.update(_package_digest().encode())
        fields = {name: value for name, value in config.to_dict().items() if name not in _RUN_ONLY}
        digest.update(json.dumps(fields, sort_keys=True, default=repr).encode())
        # CPU kernels are compiled for the thread count; a GPU update is not.
        threads = torch.get_num_threads() if device == "cpu" else None
        digest.update(f"{spaces!r}/{minibatch_rows}/{dtype}/{device}/{threads}".encode())
        return digest.hexdigest()

    def _read(self) -> dict[str, _RecordValue]:
        try:
            loaded = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(loaded, Mapping):
            return {}
        entries: dict[str, _RecordValue] = {}
        for key, value in loaded.items():
            if isinstance(value, str) and str(key).startswith(_VECTOR_ISA_PREFIX):
                entries[str(key)] = value
            elif str(key).startswith(_TIMING_PREFIX):
                timing = _read_timing(value)
                if timing is not None:
                    entries[str(key)] = timing
            elif _is_number(value) and 0.0 <= float(value) < math.inf:
                entries[str(key)] = float(value)
        return entries

    def _write(self, key: str, value: _RecordValue) -> None:
        entries = self._read()
        entries[key] = value
        try:
            write_text_atomically(self.path, json.dumps(entries, sort_keys=True, indent=1))
        except OSError:
            return

    def compiled_before(self, key: str) -> bool:
        """Whether an update with ``key`` was compiled here and recorded."""
        return isinstance(self._read().get(key), float)

    def add(self, key: str, seconds: float) -> None:
        """Record that compiling ``key`` took ``seconds`` (a failed write is ignored)."""
        self._write(key, round(seconds, 3))

    def add_timing(self, key: str, *, eager_ms: float, compiled_ms: float) -> None:
        """Record the measured cost of ``key``'s update, eager and compiled (failures ignored)."""
        self._write(_TIMING_PREFIX + key, {"eager_ms": eager_ms, "compiled_ms": compiled_ms})

    def add_load(self, key: str, seconds: float) -> None:
        """Record that loading ``key``'s precompiled update took ``seconds`` (failures ignored)."""
        self._write(_LOAD_PREFIX + key, round(seconds, 3))

    def timing(self, key: str) -> UpdateTiming | None:
        """The measured cost of ``key``'s update (:class:`UpdateTiming`), if recorded."""
        entries = self._read()
        measured = entries.get(_TIMING_PREFIX + key)
        if not isinstance(measured, dict):
            return None
        load = entries.get(_LOAD_PREFIX + key)
        return UpdateTiming(
            eager_ms=measured["eager_ms"],
            compiled_ms=measured["compiled_ms"],
            load_seconds=load if isinstance(load, float) else None,
        )

    def precompiled_path(self, key: str) -> Path:
        """Where the precompiled update named ``key`` is saved (beside the record)."""
        return self.path.parent / _PRECOMPILED_FOLDER / f"{key}.pt2"

    def vector_isa(self, machine: str) -> str | None:
        """The vector ISA inductor's build checks chose for ``machine``, if recorded."""
        value = self._read().get(_VECTOR_ISA_PREFIX + machine)
        return value if isinstance(value, str) else None

    def add_vector_isa(self, machine: str, isa: str) -> None:
        """Record the vector ISA the build checks chose for ``machine`` (failures ignored)."""
        self._write(_VECTOR_ISA_PREFIX + machine, isa)


_VECTOR_ISA_PREFIX = "vector-isa/"
_TIMING_PREFIX = "timing/"
_LOAD_PREFIX = "load/"
_PRECOMPILED_FOLDER = "typedrl-precompiled-updates"


@functools.cache
def _package_digest() -> str:
    """SHA-256 of every Python source file of the installed typedrl package, in path order."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


BACKGROUND_COMPILE_VARIABLE = "TYPEDRL_BACKGROUND_COMPILE"
"""Set to ``0`` to keep ``compile_update="auto"`` from precompiling in the background."""

_BACKGROUND_LOCK = ".background.lock"
_LOCK_GRACE_S = 60.0
"""How long a lock without a process id (being taken) counts as held."""


_LOCK_EXPIRY_S = 30 * 60.0
"""A lock older than this is taken over whatever it names (a process id may be reused)."""


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _take_background_lock(lock: Path) -> bool:
    """Take the cache folder's one background-compile lock; ``False`` while another holds it.

    The lock holds the child's process id. It is held while that process
    lives, for :data:`_LOCK_GRACE_S` while it names none yet, and never
    beyond :data:`_LOCK_EXPIRY_S`.
    """
    lock.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(2):
        try:
            handle = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            held = _lock_held(lock)
            if held is None:
                continue
            if held:
                return False
            lock.unlink(missing_ok=True)  # its process ended without removing it
            continue
        os.close(handle)
        return True
    return False


def _lock_held(lock: Path) -> bool | None:
    """Whether the background lock at ``lock`` is held; ``None`` when it cannot be read."""
    try:
        text = lock.read_text().strip()
        age = time.time() - lock.stat().st_mtime
    except OSError:
        return None
    held = _process_alive(int(text)) if text.isdigit() else age < _LOCK_GRACE_S
    return held and age < _LOCK_EXPIRY_S


def wait_for_background_precompile(
    record: CompileRecord | None = None, *, timeout_s: float = 600.0
) -> float:
    """Wait until no background compile holds ``record``'s cache folder; the seconds waited.

    For scripts that time a machine's next run (the benchmarks) or warm a
    cache before a job. A lock whose process has ended does not count.

    Args:
        record: The compile record whose folder to watch; ``None``: inductor's.
        timeout_s: Give up after this many seconds.

    Raises:
        TimeoutError: A background compile still holds the folder after ``timeout_s``.
    """
    folder = (record or CompileRecord()).precompiled_path("any").parent
    lock = folder / _BACKGROUND_LOCK
    started = time.monotonic()
    while lock.exists() and _lock_held(lock) is not False:
        waited = time.monotonic() - started
        if waited > timeout_s:
            raise TimeoutError(
                f"the background compile holding {lock} did not finish in {timeout_s:.0f} s"
            )
        time.sleep(0.2)
    return time.monotonic() - started


def start_background_precompile(
    policy: MLPActorCritic,
    optimizer: torch.optim.Optimizer,
    config: PPOConfig,
    spaces: tuple[gym.Space[Any], gym.Space[Any]],
    batch: EpochData,
    *,
    record: CompileRecord,
) -> int | None:
    """Precompile this run's update in a child process, for the machine's next run.

    The child (``python -P -m typedrl.agents._precompile_worker``, so that the
    working folder cannot shadow a package) runs at low priority with this
    process's torch thread count, rebuilds the policy (these weights), an
    Adam with the optimizer's settings and ``batch``'s shapes, compiles the
    update as :class:`CompiledUpdate` does, saves it and records it in
    ``record``. Its output goes nowhere; it removes the lock when it ends, and
    a failure leaves ``<key>.failed`` (the traceback) beside the precompiled
    files, which stops later runs from trying again. It is a best effort:
    anything that keeps it from starting (an unwritable cache folder, another
    platform than POSIX) starts nothing and raises nothing.

    Returns:
        The child's process id, or ``None`` when it was not started: another
        background compile holds the cache folder's lock, an earlier one
        failed for this update, or the child could not be started.
    """
    if os.name != "posix":
        return None
    dtype = next(iter(policy.parameters())).dtype
    key = CompileRecord.key(config, spaces, int(batch.advantage.shape[0]), dtype=dtype)
    folder = record.precompiled_path(key).parent
    lock = folder / _BACKGROUND_LOCK
    name: str | None = None
    try:
        if folder.joinpath(f"{key}.failed").exists() or not _take_background_lock(lock):
            return None
        handle, name = tempfile.mkstemp(prefix="typedrl-precompile-", suffix=".pt")
        os.close(handle)
        written = write_spec(
            Path(name),
            config=config,
            spaces=spaces,
            policy=policy,
            optimizer=optimizer,
            batch=batch,
            record_folder=record.path.parent,
        )
        if not written:  # a space the worker cannot rebuild
            Path(name).unlink(missing_ok=True)
            lock.unlink(missing_ok=True)
            return None
        environment = {
            **os.environ,
            "TORCHINDUCTOR_CACHE_DIR": str(record.path.parent),
            "TORCHINDUCTOR_COMPILE_THREADS": "1",
        }
        child = subprocess.Popen(
            [sys.executable, "-P", "-m", "typedrl.agents._precompile_worker", name, str(lock), key],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=environment,
            start_new_session=True,
        )
        lock.write_text(str(child.pid))
    except Exception:  # a best effort: the run goes on without it
        with contextlib.suppress(OSError):
            lock.unlink(missing_ok=True)
            if name is not None:
                Path(name).unlink(missing_ok=True)
        return None
    return child.pid


def precompile_supported() -> bool:
    """Whether this torch can save and load a compiled update (``aot_compile``, no guards)."""
    return hasattr(torch.compiler, "load_compiled_function") and hasattr(
        torch.compiler, "skip_all_guards_unsafe"
    )


def vector_isa_machine() -> str:
    """The key of this machine's vector-ISA check: torch, CPU architecture, C++ compiler."""
    text = f"{torch.__version__}/{platform.machine()}/{find_cpp_compiler()}"
    return hashlib.sha256(text.encode()).hexdigest()


def trust_checked_vector_isa(record: CompileRecord) -> bool:
    """Skip inductor's per-process vector-ISA build checks where they passed before.

    Before its first C++ kernel, inductor builds a probe library for every
    vector ISA the CPU claims (AVX2, AVX-512, ...) and loads each in a child
    Python, about 1.3 s in every process, warm cache or not. The first run on
    a machine lets the checks run and records the ISA they chose (keyed by
    torch's version, the CPU architecture and the C++ compiler); then every run,
    that first one included, sets ``torch._inductor.config.cpp.vec_isa_ok``
    when the CPU's own flags choose that same ISA without the checks, so that
    the setting, which is part of inductor's cache key, is the same in every
    run. Where they choose another, or the user set ``vec_isa_ok`` or
    ``simdlen``, inductor's settings are left as they are.

    Returns:
        Whether the checks are now skipped.
    """
    cpp = torch._inductor.config.cpp
    if cpp.vec_isa_ok is not None or cpp.simdlen is not None:
        return False
    try:
        from torch._inductor import cpu_vec_isa  # noqa: PLC0415 - inductor's own, when compiling

        pick, listed = cpu_vec_isa.pick_vec_isa, cpu_vec_isa.valid_vec_isa_list
        cache_clear = listed.cache_clear
    except (ImportError, AttributeError):
        return False
    machine = vector_isa_machine()
    checked = record.vector_isa(machine)
    if checked is None:
        checked = str(pick())  # the checks, which the first compile would run anyway
        record.add_vector_isa(machine, checked)
    cpp.vec_isa_ok = True
    cache_clear()
    if str(pick()) == checked:
        return True
    cpp.vec_isa_ok = None
    cache_clear()
    return False


_RUN_ONLY = frozenset({"total_timesteps", "seed", "compile_update", "extra", "learning_rate"})
"""Config fields that do not change the traced update (the learning rate is an input)."""


def _annotated_probe(x: Tensor) -> Tensor:
    return x


def runtime_checks_active() -> bool:
    """Whether jaxtyping's import hook wraps this package's annotated functions.

    The hook (``--jaxtyping-packages=typedrl,...``) decorates every annotated
    function of typedrl, this module's probe included; the compiler cannot
    trace those wrappers.
    """
    return hasattr(_annotated_probe, "__wrapped__")


def decide_compile(
    setting: bool | str,
    *,
    world_size: int,
    plain_precision: bool,
    planned_updates: int,
    compiler: str | None,
    runtime_checks: bool,
    warm_cache: bool = False,
    timing: UpdateTiming | None = None,
    min_updates: int | None = None,
) -> CompileDecision:
    """Resolve ``PPOConfig.compile_update`` for one run.

    ``True`` and ``False`` are taken as they are (``True`` is checked elsewhere
    and raises where it cannot work). ``"auto"`` compiles when every condition
    holds, and otherwise runs eagerly, without a warning.

    Args:
        setting: ``PPOConfig.compile_update``.
        world_size: Number of ranks (compiled updates are single-process).
        plain_precision: Whether Fabric runs 32-true or 64-true precision.
        planned_updates: Minibatch updates the whole budget plans.
        compiler: The C++ compiler found (:func:`find_cpp_compiler`), or ``None``.
        runtime_checks: Whether runtime shape checking is on (:func:`runtime_checks_active`).
        warm_cache: Whether this machine compiled the same update before
            (:meth:`CompileRecord.compiled_before`).
        timing: What the precompiled update saves per minibatch on this machine
            (:meth:`CompileRecord.timing`); on a warm cache the break-even
            comes from it (:meth:`UpdateTiming.break_even`) instead of
            :data:`AUTO_COMPILE_MIN_UPDATES_WARM`, and is
            :data:`AUTO_COMPILE_MIN_UPDATES` where it was measured no faster.
        min_updates: Planned updates from which compiling pays; ``None``:
            :data:`AUTO_COMPILE_MIN_UPDATES` on a cold cache; on a warm one the
            measured break-even, or :data:`AUTO_COMPILE_MIN_UPDATES_WARM` without a
            measurement.

    Example:
        >>> decide_compile(
        ...     "auto", world_size=1, plain_precision=True, planned_updates=500,
        ...     compiler="/usr/bin/g++", runtime_checks=False,
        ... ).reason
        'eager: 500 planned minibatch updates do not amortise compiling (needs 100000)'
        >>> decide_compile(
        ...     "auto", world_size=1, plain_precision=True, planned_updates=20_000,
        ...     compiler="/usr/bin/g++", runtime_checks=False, warm_cache=True,
        ... ).reason
        'compiled: 20000 planned minibatch updates (a warm compile cache), compiler /usr/bin/g++'
    """
    if setting is True or setting is False:
        return CompileDecision(enabled=setting, reason=f"compile_update={setting} (set explicitly)")
    reasons = []
    if world_size > 1:
        reasons.append(f"{world_size} ranks (compiled updates are single-process)")
    if not plain_precision:
        reasons.append("a precision other than 32-true or 64-true")
    if compiler is None:
        reasons.append("no C++ compiler found")
    if runtime_checks:
        reasons.append("runtime shape checking is on")
    measured = timing if warm_cache and min_updates is None else None
    warm = (
        ""
        if not warm_cache
        else " (a warm compile cache)"
        if measured is None
        else f" (a warm compile cache; {measured.describe()})"
    )
    if measured is not None:
        # Measured no faster (or a noisy measurement said so): only a plan that would
        # pay for a cold compile compiles, as without the measurement.
        min_updates = measured.break_even() or AUTO_COMPILE_MIN_UPDATES
    elif min_updates is None:
        min_updates = AUTO_COMPILE_MIN_UPDATES_WARM if warm_cache else AUTO_COMPILE_MIN_UPDATES
    if planned_updates < min_updates:
        reasons.append(
            f"{planned_updates} planned minibatch updates do not amortise compiling{warm} "
            f"(needs {min_updates})"
        )
    if reasons:
        return CompileDecision(enabled=False, reason="eager: " + "; ".join(reasons))
    return CompileDecision(
        enabled=True,
        reason=f"compiled: {planned_updates} planned minibatch updates{warm}, compiler {compiler}",
    )


class _Evaluator(nn.Module):
    """The policy's ``evaluate_tensors`` as ``forward``, for :func:`torch.func.functional_call`."""

    def __init__(self, policy: MLPActorCritic) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, obs: TensorDict, action: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return self.policy.evaluate_tensors(obs, action)


class CompiledUpdate:
    """One compiled PPO minibatch update: loss, gradients, clipping and Adam.

    Args:
        policy: The actor-critic (not wrapped by Fabric).
        optimizer: The run's :class:`torch.optim.Adam` over exactly the
            policy's trainable parameters, in one parameter group, without
            weight decay, AMSGrad, maximisation or differentiable mode.
        config: The run's config (loss coefficients, clip range, max grad norm).
        report: Called with one line before and one after each compilation
            (the console of a run with a progress display); ``None`` says nothing.
        record: Where to record each compilation, with the key of each
            minibatch size (:meth:`CompileRecord.key`); ``None`` records nothing.

    Raises:
        ConfigError: If the optimizer is not such an Adam.
    """

    def __init__(
        self,
        policy: MLPActorCritic,
        optimizer: torch.optim.Optimizer,
        config: PPOConfig,
        *,
        report: Callable[[str], None] | None = None,
        record: tuple[CompileRecord, Callable[[int], str]] | None = None,
    ):
        self._evaluator = _Evaluator(policy)
        named = [(f"policy.{name}", p) for name, p in policy.named_parameters() if p.requires_grad]
        self._parameters = [p for _, p in named]
        _check_adam(optimizer, self._parameters)
        self._optimizer = optimizer
        self._checked_group = optimizer.param_groups[0]
        # Views sharing the parameters' storage: differentiated by torch.func.grad and
        # updated in place, which updates the parameters themselves.
        self._values = {name: p.detach() for name, p in named}
        device = self._parameters[0].device
        # The learning rate is an input, not a constant: schedules change it without
        # recompiling. One element, not 0-dim: the compiler would read a 0-dim tensor
        # as a Python float, which a precompiled function cannot take.
        self._learning_rate = torch.zeros((1,), dtype=torch.float64, device=device)
        self._config = config
        # Adam's constants are traced into the update; other values compile it again.
        self._constants: tuple[float, float, float] | None = None
        # The compiled update of each minibatch shape seen so far (the first compiles).
        self._compiled: dict[tuple[int, bool], Callable[..., tuple[Tensor, Tensor]]] = {}
        self._shapes: set[tuple[int, bool]] = set()
        self._report = report
        self._record = record
        # Precompiling needs the record's folder, and a policy whose code is typedrl's own.
        self._precompile = (
            record is not None and type(policy) is MLPActorCritic and precompile_supported()
        )
        self._layout = repr(policy) + json.dumps(
            [
                (name, list(t.shape), str(t.dtype), str(t.device))
                for name, t in (*policy.named_parameters(), *policy.named_buffers())
            ]
        )
        self.compile_seconds = 0.0
        """Wall time of the updates that compiled (the first of each minibatch shape)."""
        self.precompiled_loads = 0
        """Minibatch shapes whose update was loaded from a precompiled file."""

    def __call__(self, batch: EpochData) -> tuple[Tensor, Tensor]:
        """Update the policy on ``batch``; return the gradient norm and the loss statistics.

        The norm is the one before clipping; when it is not finite nothing was
        updated.
        """
        # Read each time: schedules write the group's lr, and loading an optimizer
        # state dict replaces the group (checked again when it does).
        group = self._optimizer.param_groups[0]
        if group is not self._checked_group:
            _check_adam(self._optimizer, self._parameters)
            self._checked_group = group
        self._learning_rate.fill_(float(group["lr"]))
        beta1, beta2 = group["betas"]
        constants = (float(beta1), float(beta2), float(group["eps"]))
        if constants != self._constants:
            self._constants = constants
            self._compiled.clear()
        inputs = {
            "evaluator": self._evaluator,
            "values": self._values,
            "states": [self._state(p, group) for p in self._parameters],
            "batch": batch,
            "learning_rate": self._learning_rate,
        }
        shape = (int(batch.advantage.shape[0]), batch.valid is None)
        update = self._compiled.get(shape)
        if update is not None:
            return update(**inputs)
        first_of_shape = shape not in self._shapes
        self._shapes.add(shape)
        if self._report is not None:
            once = "once" if len(self._shapes) == 1 else "once more, for a new minibatch size"
            self._report(
                f"compiling the update for minibatches of {shape[0]} rows ({once}; "
                f"{COMPILE_SECONDS_MEASURED} where measured on a cold compile cache, a few "
                "seconds on a warm one; env steps/s exclude it)..."
            )
        started = time.perf_counter()
        if self._record is not None and len(self._shapes) == 1 and first_of_shape:
            # Part of compiling: the first compilation of the process runs the checks.
            trust_checked_vector_isa(self._record[0])
        update, loaded = self._compile(shape, constants, inputs)
        if loaded:
            try:
                result = update(**inputs)
            except Exception:  # a file this process cannot run: compile it again, and save
                update, loaded = self._compile(shape, constants, inputs, load=False)
                result = update(**inputs)
        else:
            result = update(**inputs)
        seconds = time.perf_counter() - started
        self._compiled[shape] = update
        self.compile_seconds += seconds
        self.precompiled_loads += int(loaded)
        if self._record is not None:
            record, key = self._record
            record.add(key(shape[0]), seconds)
            if loaded:
                record.add_load(key(shape[0]), seconds)
        if self._report is not None:
            how = "loaded the precompiled update" if loaded else "compiled the update"
            self._report(f"{how} in {seconds:.1f} s")
        return result

    def _compile(
        self,
        shape: tuple[int, bool],
        constants: tuple[float, float, float],
        inputs: dict[str, Any],
        *,
        load: bool = True,
    ) -> tuple[Callable[..., tuple[Tensor, Tensor]], bool]:
        """The update for ``shape``: loaded, precompiled and saved, or compiled in-process.

        Returns it and whether it was loaded from a precompiled file
        (``load=False``: never; a file there is replaced).
        """
        beta1, beta2, eps = constants
        config = self._config

        def update(
            *,
            evaluator: _Evaluator,
            values: dict[str, Tensor],
            states: list[_AdamState],
            batch: EpochData,
            learning_rate: Tensor,
        ) -> tuple[Tensor, Tensor]:
            return _update(
                evaluator=evaluator,
                values=values,
                states=states,
                batch=batch,
                learning_rate=learning_rate,
                config=config,
                beta1=beta1,
                beta2=beta2,
                eps=eps,
            )

        if self._precompile and self._record is not None:
            record, key = self._record
            name = self._precompiled_key(key(shape[0]), shape, constants, inputs)
            path = record.precompiled_path(name)
            loaded = _load_precompiled(path, update) if load else None
            if loaded is not None:
                return loaded, True
            precompiled = _precompile(update, inputs, path)
            if precompiled is not None:
                return precompiled, False
        compiled: Callable[..., tuple[Tensor, Tensor]] = torch.compile(update)
        return compiled, False

    def _precompiled_key(
        self,
        record_key: str,
        shape: tuple[int, bool],
        constants: tuple[float, float, float],
        inputs: Mapping[str, object],
    ) -> str:
        """The name of the precompiled update: everything its traced graph depends on.

        ``inputs`` are the update's arguments: the shape, stride, dtype and
        device of every tensor among them (parameters, Adam's state, each
        field and observation leaf of the minibatch, the learning rate) are
        part of the name, as are the policy's buffers (:attr:`_layout`).
        """
        digest = hashlib.sha256(record_key.encode())
        digest.update(_package_digest().encode())
        digest.update(self._layout.encode())
        digest.update("\n".join(_tensor_layout(inputs)).encode())
        digest.update(repr((shape, constants)).encode())
        digest.update(_build_target().encode())
        return digest.hexdigest()

    def _state(self, parameter: Tensor, group: dict[str, Any]) -> _AdamState:
        """The optimizer's state of ``parameter``, created as Adam creates it on its first step."""
        state = self._optimizer.state[parameter]
        if not state:
            fused = bool(group.get("fused"))
            state["step"] = torch.zeros(
                (),
                dtype=torch.float32 if fused else _default_scalar_dtype(),
                device=parameter.device if fused else torch.device("cpu"),
            )
            state["exp_avg"] = torch.zeros_like(parameter, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(parameter, memory_format=torch.preserve_format)
        return state["step"], state["exp_avg"], state["exp_avg_sq"]


def measure_update(
    update: Callable[[EpochData], object],
    policy: MLPActorCritic,
    optimizer: torch.optim.Optimizer,
    config: PPOConfig,
    batch: EpochData,
    *,
    blocks: int = 5,
    block_seconds: float = 0.05,
) -> UpdateTiming:
    """Time ``update`` (compiled) against the eager update on ``batch``, in turn.

    The eager update is the one PPO runs without ``compile_update``: the loss
    (``ppo_loss``), its backward, the gradient norm, clipping and Adam's step
    (:class:`~typedrl.training.GradientStep`), on the same policy and
    optimizer. Blocks of calls of one alternate with blocks of the other;
    each block lasts about ``block_seconds`` (at least 5 and at most 200
    calls), and each figure is the fastest of ``blocks`` blocks per call, so
    that other work on the machine shows in neither. Both update the policy,
    which is the caller's to throw away.
    """
    step = GradientStep(
        [p for p in policy.parameters() if p.requires_grad],
        optimizer,
        dist=SingleProcess(),
        max_grad_norm=config.max_grad_norm,
        synchronised=True,
        in_place=True,
    )

    def eager() -> None:
        loss, _ = ppo_loss(config, batch, policy.evaluate_tensors)
        step.clear()
        torch.autograd.backward(loss)
        reduced = step.reduce()
        if math.isfinite(float(reduced.norm)):
            step.apply(reduced)
        else:
            step.skip()

    def compiled() -> None:
        update(batch)

    def per_call(run: Callable[[], None], calls: int) -> float:
        started = time.perf_counter()
        for _ in range(calls):
            run()
        return (time.perf_counter() - started) / calls

    # The first calls allocate; the next ones size the blocks.
    per_call(eager, 1)
    per_call(compiled, 1)
    first = max(per_call(eager, 1), per_call(compiled, 1), 1e-6)
    calls = min(200, max(5, math.ceil(block_seconds / first)))
    times: dict[str, list[float]] = {"eager": [], "compiled": []}
    for _ in range(blocks):
        times["eager"].append(per_call(eager, calls))
        times["compiled"].append(per_call(compiled, calls))
    return UpdateTiming(
        eager_ms=min(times["eager"]) * 1e3, compiled_ms=min(times["compiled"]) * 1e3
    )


def _build_target() -> str:
    """What the compiled C++ is built for and with, beside the traced graph.

    The vector ISA inductor picks (its width is written into the generated
    code), the CPU architecture, the C++ compiler, the thread count (written
    into the kernels' parallel loops), the versions of torch and tensordict
    (whose internals the traced code reads), torch's default dtype and
    deterministic mode, and inductor's own vector settings.
    """
    from torch._inductor import cpu_vec_isa  # noqa: PLC0415 - inductor's own, when compiling

    cpp = torch._inductor.config.cpp
    return repr(
        (
            str(cpu_vec_isa.pick_vec_isa()),
            platform.machine(),
            find_cpp_compiler(),
            torch.get_num_threads(),
            torch.__version__,
            tensordict.__version__,
            torch.get_default_dtype(),
            torch.are_deterministic_algorithms_enabled(),
            cpp.vec_isa_ok,
            cpp.simdlen,
            cpp.dynamic_threads,
        )
    )


def _tensor_layout(value: object, path: str = "") -> list[str]:
    """``path: shape stride dtype device`` of every tensor in ``value``, in a fixed order.

    Walks mappings (by sorted key), sequences, TensorDicts (every leaf) and
    dataclasses (every field); a module or any other value is written as its
    type (a module's parameters and buffers are named elsewhere).
    """
    if isinstance(value, Tensor):
        return [f"{path}: {tuple(value.shape)} {value.stride()} {value.dtype} {value.device}"]
    children: list[tuple[str, object]]
    if isinstance(value, TensorDict):
        leaves = value.items(include_nested=True, leaves_only=True)
        children = sorted(((str(key), leaf) for key, leaf in leaves), key=lambda item: item[0])
    elif isinstance(value, Mapping) and not isinstance(value, nn.Module):
        children = [(str(key), value[key]) for key in sorted(value, key=str)]
    elif isinstance(value, list | tuple):
        children = [(f"[{index}]", item) for index, item in enumerate(value)]
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        children = [(field.name, getattr(value, field.name)) for field in dataclasses.fields(value)]
    else:
        return [f"{path}: {type(value).__qualname__}"]
    return [line for name, child in children for line in _tensor_layout(child, f"{path}.{name}")]


def _load_precompiled(
    path: Path, update: Callable[..., tuple[Tensor, Tensor]]
) -> Callable[..., tuple[Tensor, Tensor]] | None:
    """The precompiled update saved at ``path``, or ``None`` when it is absent or unusable."""
    if not path.is_file():
        return None
    try:
        with path.open("rb") as handle:
            loaded: Callable[..., tuple[Tensor, Tensor]] = torch.compiler.load_compiled_function(
                handle, f_globals=update.__globals__
            )
    except Exception:  # any failure of the experimental loader: compile instead
        return None
    return loaded


def _precompile(
    update: Callable[..., tuple[Tensor, Tensor]], inputs: dict[str, Any], path: Path
) -> Callable[..., tuple[Tensor, Tensor]] | None:
    """Trace and compile ``update`` for ``inputs`` without guards, and save it at ``path``.

    ``None`` when torch cannot (the in-process compile takes over). A file that
    cannot be written is not saved; the compiled update is returned anyway.
    """
    skip_guards = torch.compiler.skip_all_guards_unsafe
    try:
        compiled: Any = torch.compile(
            update, fullgraph=True, options={"guard_filter_fn": skip_guards}
        )
        precompiled: Any = compiled.aot_compile(((), inputs))
    except Exception:  # the experimental precompiler refused: compile instead
        return None
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        precompiled.save_compiled_function(str(temporary))
        temporary.replace(path)
    except Exception:  # not saved: the next run compiles again
        temporary.unlink(missing_ok=True)
    result: Callable[..., tuple[Tensor, Tensor]] = precompiled
    return result


def _update(
    *,
    evaluator: _Evaluator,
    values: dict[str, Tensor],
    states: list[_AdamState],
    batch: EpochData,
    learning_rate: Tensor,
    config: PPOConfig,
    beta1: float,
    beta2: float,
    eps: float,
) -> tuple[Tensor, Tensor]:
    """The traced body of :class:`CompiledUpdate` (see the module docstring)."""

    def loss_of(parameters: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        def evaluate(obs: TensorDict, action: Tensor) -> tuple[Tensor, Tensor, Tensor]:
            out: tuple[Tensor, Tensor, Tensor] = torch.func.functional_call(
                evaluator, parameters, (obs, action)
            )
            return out

        return ppo_loss(config, batch, evaluate)

    grads, stats = torch.func.grad(loss_of, has_aux=True)(values)
    gradients = [grads[name] for name in values]
    # ||g|| = sqrt(sum_i ||g_i||^2) over every parameter's gradient g_i
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in gradients]))
    finite = torch.isfinite(norm)
    if config.max_grad_norm is not None:
        # g <- g * min(1, max_norm / (||g|| + 1e-6))
        scale = (config.max_grad_norm / (norm + 1e-6)).clamp(max=1.0)
        gradients = [g * scale for g in gradients]
    with torch.no_grad():
        for parameter, grad, (step, exp_avg, exp_avg_sq) in zip(
            values.values(), gradients, states, strict=True
        ):
            # t <- t + 1; m <- b1 m + (1 - b1) g; v <- b2 v + (1 - b2) g^2
            new_step = step + 1
            new_exp_avg = torch.lerp(exp_avg, grad, 1.0 - beta1)
            new_exp_avg_sq = exp_avg_sq * beta2 + (1.0 - beta2) * grad * grad
            # theta <- theta - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps),
            # the bias corrections in float64 as Adam's fused kernel computes them.
            t = new_step.to(torch.float64)
            bias_correction1 = 1.0 - beta1**t
            bias_correction2_sqrt = (1.0 - beta2**t).sqrt()
            denominator = new_exp_avg_sq.sqrt() / bias_correction2_sqrt + eps
            new_parameter = (
                parameter
                - (learning_rate.reshape(()) / bias_correction1) * new_exp_avg / denominator
            )
            # A non-finite norm keeps every value (no host read to decide).
            # (A step kept on the CPU, as non-fused Adam keeps it, takes the flag there.)
            step.copy_(torch.where(finite.to(step.device), new_step, step))
            exp_avg.copy_(torch.where(finite, new_exp_avg, exp_avg))
            exp_avg_sq.copy_(torch.where(finite, new_exp_avg_sq, exp_avg_sq))
            parameter.copy_(torch.where(finite, new_parameter, parameter))
    return norm, stats


def _check_adam(optimizer: torch.optim.Optimizer, parameters: Sequence[Tensor]) -> None:
    where = "PPOConfig.compile_update"
    if type(optimizer) is not torch.optim.Adam:
        raise ConfigError(f"{where} needs torch.optim.Adam, got {type(optimizer).__name__}")
    if len(optimizer.param_groups) != 1:
        raise ConfigError(f"{where} needs one parameter group, got {len(optimizer.param_groups)}")
    group: dict[str, Any] = optimizer.param_groups[0]
    unsupported = [
        name for name in ("amsgrad", "maximize", "differentiable", "capturable") if group.get(name)
    ]
    if group.get("weight_decay"):
        unsupported.append("weight_decay")
    if unsupported:
        raise ConfigError(f"{where} does not support Adam's {unsupported}")
    if [id(p) for p in group["params"]] != [id(p) for p in parameters]:
        raise ConfigError(f"{where}: the optimizer must hold exactly the policy's parameters")


def _default_scalar_dtype() -> torch.dtype:
    return torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32
