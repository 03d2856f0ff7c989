"""Tests for typedrl._wrapper_spec: wrapper specs are parsed, never evaluated."""

import pytest

from typedrl._wrapper_spec import WrapperSpec, parse_wrapper_spec, wrapper_text
from typedrl.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("TimeLimit", WrapperSpec("TimeLimit")),
        (
            " gymnasium.wrappers.TimeAwareObservation ",
            WrapperSpec("gymnasium.wrappers.TimeAwareObservation"),
        ),
        ("mypkg.mod:MyWrapper(scale=0.5)", WrapperSpec("mypkg.mod:MyWrapper", {"scale": 0.5})),
        ("FrameStackObservation()", WrapperSpec("FrameStackObservation")),
        (
            "FilterObservation(filter_keys=['image'], flag=True, shape=(2, 3), none=None, "
            "d={'a': -1})",
            WrapperSpec(
                "FilterObservation",
                {
                    "filter_keys": ["image"],
                    "flag": True,
                    "shape": (2, 3),
                    "none": None,
                    "d": {"a": -1},
                },
            ),
        ),
    ],
)
def test_specs_parse(text: str, expected: WrapperSpec) -> None:
    """Names, dotted paths, module:Class and keyword arguments of literal values."""
    assert parse_wrapper_spec(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected a wrapper name"),
        ("9Lives", "expected a wrapper name"),
        ("a:b:c", "expected a wrapper name"),
        ("Frame(4)", "positional arguments are not accepted"),
        ("Frame(**{'a': 1})", r"\*\*kwargs is not accepted"),
        ("Frame(a=1, a=2)", "'a' is given twice"),
        ("Frame(a=__import__('os').system('true'))", "the value of 'a' .* is not a Python literal"),
        ("Frame(a=x)", r"the value of 'a' \(x\) is not a Python literal"),
        ("Frame(a=1)(b=2)", "not a single call"),
        ("Frame(a=1) + 1", "not a single call"),
        ("Frame(a=1", "not a call with keyword arguments"),
    ],
)
def test_anything_else_is_one_line(text: str, message: str) -> None:
    """Every refusal is one ConfigError line naming the spec; nothing is ever evaluated."""
    with pytest.raises(ConfigError, match=message) as caught:
        parse_wrapper_spec(text)
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith(f"wrapper {text!r}")


def test_the_config_check_names_the_field() -> None:
    """wrapper_text keeps a valid spec as given and names run.wrappers[i] in its refusals."""
    assert wrapper_text("run", "wrappers[0]", "Frame(a=1)") == "Frame(a=1)"
    with pytest.raises(ConfigError, match=r"^run\.wrappers\[1\]: wrapper 'Frame\(4\)'"):
        wrapper_text("run", "wrappers[1]", "Frame(4)")
    with pytest.raises(ConfigError, match=r"^run\.wrappers\[0\] must be a wrapper spec string"):
        wrapper_text("run", "wrappers[0]", {"name": "Frame"})
