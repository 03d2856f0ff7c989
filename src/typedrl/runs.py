"""The run folder's ``config.yaml``: its keys, its ``run:`` section, reading and writing it.

``typedrl train`` writes the resolved settings of every run to
``<run_dir>/config.yaml``, a YAML mapping with the keys :data:`RUN_KEYS`, in
that order: ``source`` (which layers the values came from), ``algo``,
``env_id``, ``num_envs``, ``seed``, ``config`` (the config dataclass's
:meth:`~typedrl.ppo.PPOConfig.to_dict`, without ``seed`` and the policy's
fields), ``policy`` (the policy: the built-in policy's settings, the config
fields marked as the policy's, such as PPO's ``core``, ``encoder`` and
``actor_hidden``; or, in a run that trains a policy of its own, the
:class:`~typedrl.policies.PolicyFactory` that builds it, as ``{target: ...,
kwargs: {...}}``, the built-in policy's fields then staying in ``config``),
``run`` (the :class:`RunSettings`) and ``command`` (the
command line). The same file, given
to ``typedrl train --config``, runs the same settings again; ``--resume
RUN_DIR``, ``evaluate`` and ``export`` read it to rebuild the run's env.

This module knows the format only; how ``typedrl train`` resolves the values
is the command's business, and this module imports nothing of it.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as run:
    ...     document = {"env_id": "CartPole-v1", "run": {"eval_every": 500}}
    ...     path = write_run_config(Path(run), document)
    ...     document = read_run_config(path)
    >>> document["env_id"], RunSettings.from_dict(document["run"]).eval_every
    ('CartPole-v1', 500)
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, final

import yaml

from typedrl import _config_fields
from typedrl._atomic import write_text_atomically
from typedrl._config_fields import check, optional, sequence_of
from typedrl._validation import describe, positive_int
from typedrl._wrapper_spec import wrapper_text
from typedrl.errors import ConfigError

__all__ = [
    "CONFIG_FILE",
    "OPTIONAL_RUN_KEYS",
    "RUN_KEYS",
    "Accelerator",
    "RunSettings",
    "Vectorization",
    "dump_run_config",
    "read_run_config",
    "write_run_config",
]

CONFIG_FILE: Final = "config.yaml"
"""The resolved config's file name in a run folder."""

RUN_KEYS: Final = (
    "source",
    "algo",
    "env_id",
    "num_envs",
    "seed",
    "config",
    "policy",
    "run",
    "command",
)
"""The top-level keys of a run's ``config.yaml`` (a ``--config`` file may hold any of them)."""

OPTIONAL_RUN_KEYS: Final = ("policy",)
"""The keys of :data:`RUN_KEYS` that a run's ``config.yaml`` may leave out (every other
one is always written): ``policy`` is left out where the algorithm's config marks no
field as the policy's and the run trains the built-in policy, and by earlier releases."""

Vectorization: TypeAlias = Literal["sync", "async"]
"""How Gymnasium envs are batched: in the process, or one subprocess per env."""

Accelerator: TypeAlias = Literal["cpu", "cuda", "auto"]
"""Fabric's accelerator."""

_OPTIONAL_POSITIVE_INT = check(optional(positive_int))


def _env_kwargs(owner: str, name: str, value: object) -> dict[str, Any]:
    if not isinstance(value, dict) or any(type(key) is not str for key in value):
        raise ConfigError(
            f"{owner}.{name} must be a mapping of names to values, got {describe(value)}"
        )
    return value


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class RunSettings:
    """The run options ``typedrl train`` takes besides the config (the ``run:`` section).

    Built from YAML values with :meth:`from_dict`; messages name a field
    ``run.<field>``, as the file does.
    """

    eval_every: int | None = field(default=None, metadata=_OPTIONAL_POSITIVE_INT)
    """Evaluate every this many env steps (``None``: at the end only)."""
    eval_episodes: int = field(default=16, metadata=check(positive_int))
    """Episodes per evaluation and rank."""
    checkpoint_every: int | None = field(default=None, metadata=_OPTIONAL_POSITIVE_INT)
    """Write ``epoch_<n>.ckpt`` every this many iterations (``None``: never)."""
    keep_checkpoints: int | None = field(default=None, metadata=_OPTIONAL_POSITIVE_INT)
    """Keep only the newest this many ``epoch_<n>.ckpt`` files (``None``: all)."""
    vectorization: Vectorization = "sync"
    """How Gymnasium envs are batched (built-in torch envs are always batched natively)."""
    accelerator: Accelerator = "cpu"
    """Fabric's accelerator."""
    devices: int | None = field(default=None, metadata=_OPTIONAL_POSITIVE_INT)
    """Processes per node (DDP when more than one in all).

    ``None``: the processes ``torchrun`` or ``srun`` started on each node, 1
    without a launcher. A run's ``config.yaml`` records the number it ran with.
    """
    num_nodes: int | None = field(default=None, metadata=_OPTIONAL_POSITIVE_INT)
    """Nodes (``None``: the launch's; 1 without a launcher). Checked against the launch."""
    env_kwargs: dict[str, Any] = field(default_factory=dict, metadata=check(_env_kwargs))
    """Keyword arguments of the env's constructor."""
    wrappers: tuple[str, ...] = field(
        default=(), metadata=check(sequence_of(wrapper_text, expected="a list of wrapper specs"))
    )
    """Gymnasium wrappers applied to each single env, in order: ``--wrapper``'s specs.

    A name (``"RecordEpisodeStatistics"``, ``"gymnasium.wrappers.TimeAwareObservation"``,
    ``"mypkg.mod:MyWrapper"``), optionally with keyword arguments of literal values
    (``"FrameStackObservation(stack_size=4)"``); see :mod:`typedrl.envs`.
    """
    clip_actions: bool | None = None
    """Clip ``Box`` actions to the action space's bounds before the env sees them.

    ``None`` keeps the env's own rule: the built-in envs clip (as Gymnasium's
    own envs do inside ``step``); other envs get the policy's actions as given.
    """
    wandb_project: str | None = None
    """Also log to this Weights & Biases project."""

    def __post_init__(self) -> None:
        _config_fields.validate(self, owner="run")

    def to_dict(self) -> dict[str, Any]:
        """The settings as YAML values (the ``run:`` section)."""
        return _config_fields.to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunSettings":
        """Build the settings from a ``run:`` section; unknown keys raise ConfigError."""
        return _config_fields.from_dict(cls, data, owner="run")


def read_run_config(path: Path) -> dict[str, Any]:
    """Read a ``--config`` file or a run's ``config.yaml``: any of :data:`RUN_KEYS`.

    Raises:
        ConfigError: The file is missing, not YAML, or has other top-level keys.
    """
    try:
        content = path.read_text()
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the config file ({error.strerror})") from None
    data = parse_mapping(content, path, f"keys among {list(RUN_KEYS)}")
    unknown = sorted(str(key) for key in data if key not in RUN_KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: unknown keys {unknown}; a config file has keys among {list(RUN_KEYS)}"
        )
    for key in ("config", "policy", "run"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise ConfigError(f"{path}: {key} must be a mapping, got {describe(data[key])}")
    return data


def parse_mapping(text: str, path: Path, expected: str) -> dict[str, Any]:
    """The mapping a YAML document holds (``{}`` for an empty one).

    The one YAML reader of config files, run folders and tuned files.

    Raises:
        ConfigError: The text is not YAML, or holds something other than a mapping
            (the message names ``path`` and says the mapping's ``expected`` keys).
    """
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML ({error})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with {expected}, got {describe(data)}")
    return data


def dump_run_config(document: Mapping[str, Any]) -> str:
    """The YAML text of a run document, keys in their order."""
    return yaml.safe_dump(dict(document), sort_keys=False, default_flow_style=False)


def write_run_config(run_dir: Path, document: Mapping[str, Any]) -> Path:
    """Write ``<run_dir>/config.yaml`` atomically.

    Raises:
        ConfigError: The file cannot be written.
    """
    path = run_dir / CONFIG_FILE
    try:
        write_text_atomically(path, dump_run_config(document))
    except OSError as error:
        raise ConfigError(f"{path}: cannot write the run's config ({error.strerror})") from None
    return path
