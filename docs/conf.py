"""Sphinx configuration of the typedrl documentation.

Build it with ``nox -s docs`` or, from the repository root::

    sphinx-build -W --keep-going -n -b html docs docs/_build/html

No extension here reaches the network (no intersphinx): the docs build offline.
"""

import dataclasses
import re
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from sphinx.application import Sphinx

# -- Project ---------------------------------------------------------------

project = "typedrl"
author = "The typedrl developers"
copyright = "the typedrl developers"
try:
    release = version("typedrl")
except PackageNotFoundError:  # pragma: no cover - building from an uninstalled tree
    release = "0.0.0"
version = ".".join(release.split(".")[:2])

# -- General ---------------------------------------------------------------

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]
exclude_patterns = ["_build"]
root_doc = "index"

# Every cross-reference must resolve (``-n``). Only names from third-party
# packages, which cannot be linked without intersphinx, are exempt; see the
# list below.
nitpicky = True
nitpick_ignore_regex = [
    (
        "py:.*",
        r"(torch|tensordict|gymnasium|jaxtyping|numpy|lightning|lightning_fabric|rich)(\..*)?",
    ),
    # The bare ``Tensor`` inside jaxtyping annotations such as Float[Tensor, "..."].
    ("py:class", r"Tensor"),
    # The standard library, unlinkable without intersphinx.
    ("py:class", r"collections\.abc\.\w+"),
    ("py:class", r"(pathlib\.Path|os\.PathLike|abc\.ABC|datetime\.timedelta)"),
    ("py:mod", r"random"),
    ("py:func", r"(os\.replace|random\.\w+)"),
    # A type variable that only keeps a helper's argument and return types
    # together (setup_module_and_optimizer's module type): it appears in the
    # signature by its private path and has nothing of its own to document.
    ("py:class", r"typedrl\.training\._fabric\.ModuleT"),
    # The state type of the task hooks the MJCF backends share (MujocoState, NewtonState):
    # MujocoTask and NewtonTask inherit observe, reward and terminated with it.
    ("py:class", r"typedrl\.envs\._mjcf_task\.StateT"),
    # PPO's internal piece that appears in its signatures by its private path: the
    # state value its trainer merges into a checkpoint.
    ("py:class", r"typedrl\.ppo\._algorithm\.PPOState"),
]

# -- autodoc ---------------------------------------------------------------

autodoc_member_order = "bysource"
autodoc_default_options = {"members": True}
# Types go into the signature: jaxtyping annotations such as
# ``Float[Tensor, 'num_envs obs_dim']`` then read as the shapes they describe.
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_class_signature = "mixed"
autodoc_preserve_defaults = True
python_use_unqualified_type_names = True
python_maximum_signature_line_length = 88

# -- napoleon (Google style docstrings) -------------------------------------

napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_include_init_with_doc = False
napoleon_use_rtype = False
napoleon_attr_annotations = False

# -- HTML ------------------------------------------------------------------

html_theme = "furo"
html_title = f"typedrl {release}"
html_static_path: list[str] = []


# -- Hooks -----------------------------------------------------------------

_ALIAS_MODULE = "typedrl.types."


def _show_alias_value(
    app: Sphinx, what: str, name: str, obj: object, options: Any, lines: list[str]
) -> None:
    """Say what each shape alias of ``typedrl.types`` stands for.

    autodoc would print the raw ``repr`` of the class jaxtyping builds
    (``<class 'jaxtyping.Float[...]'>``); the qualified name reads better.
    """
    del app, options
    if what != "data" or not name.startswith(_ALIAS_MODULE) or not isinstance(obj, type):
        return
    lines.extend(["", f"Alias of ``{obj.__qualname__}``."])


def _no_inline_attribute_types(
    app: Sphinx, what: str, name: str, obj: object, options: Any, lines: list[str]
) -> None:
    """Stop napoleon from reading ``Summary: detail`` as ``type: description``.

    For attributes, properties and module data, Google style lets the first
    line start with an inline type (``int: The count.``). typedrl never uses
    that form (types come from annotations), but many of its one-line
    docstrings read ``Summary: detail``. An empty reST comment in front of the
    text leaves napoleon nothing to split; it renders as nothing.
    """
    del app, name, obj, options
    if what in {"attribute", "property", "data"} and any(line.strip() for line in lines):
        lines[:0] = ["..", ""]


def _dataclass_factory_defaults(
    app: Sphinx,
    what: str,
    name: str,
    obj: object,
    options: Any,
    signature: str | None,
    return_annotation: str | None,
) -> tuple[str | None, str | None] | None:
    """Replace ``=<factory>`` in dataclass signatures, which is not valid Python.

    Sphinx falls back to splitting such a signature at every comma, which
    mangles subscripted annotations; ``=dict()`` parses and says what it is.
    """
    del app, name, options
    if what != "class" or signature is None or not dataclasses.is_dataclass(obj):
        return None
    for item in dataclasses.fields(obj):
        factory = item.default_factory
        if factory is dataclasses.MISSING:
            continue
        label = getattr(factory, "__name__", "factory")
        pattern = rf"(\b{re.escape(item.name)}\s*:[^=]*=\s*)<factory>"
        signature = re.sub(pattern, rf"\g<1>{label}()", signature, count=1)
    return signature, return_annotation


def _protocol_class_signature(
    app: Sphinx,
    what: str,
    name: str,
    obj: object,
    options: Any,
    signature: str | None,
    return_annotation: str | None,
) -> tuple[str | None, str | None] | None:
    """Drop the meaningless ``(*args, **kwargs)`` that ``typing.Protocol`` classes inherit."""
    del app, name, options
    if what == "class" and getattr(obj, "_is_protocol", False):
        return "", return_annotation
    return None


def setup(app: Sphinx) -> None:
    """Register the hooks above."""
    # Before napoleon's own handler, which runs at the default priority 500.
    app.connect("autodoc-process-docstring", _no_inline_attribute_types, priority=400)
    app.connect("autodoc-process-signature", _protocol_class_signature)
    app.connect("autodoc-process-docstring", _show_alias_value)
    app.connect("autodoc-process-signature", _dataclass_factory_defaults)
