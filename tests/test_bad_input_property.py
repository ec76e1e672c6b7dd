"""Property-based: generated bad values are refused with a clear error, every time.

For every shipped experiment, every leaf field of its config gets generated
values of each bad kind that applies to its type (:func:`bad_inputs.
field_kinds`: ill-typed text, fractions for ints, negatives, nan/inf, a
non-choice, a non-str, an unknown algorithm ...): ``configtools.override``
must raise ``ValueError`` naming the field. The same values through the
command line (``agentrl train EXP --FIELD VALUE``) and generated bad values
of every numeric command-line argument must exit with code 2, ``error:`` and
no traceback. Nothing compiles: the experiments are only configured.
"""

from __future__ import annotations

import shlex

import pytest
from bad_inputs import (
    BAD_NAME,
    CLI_ARG_KINDS,
    CLI_ARGS,
    FRACTIONAL,
    NEGATIVE,
    NON_FINITE,
    NOT_A_BOOL,
    NOT_A_CHOICE,
    NOT_A_NUMBER,
    NOT_PAIRS,
    UNKNOWN_ALGO,
    WRONG_TYPE,
    experiment_configs,
    field_kinds,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentrl import configtools
from agentrl.cli import main

CONFIGS = experiment_configs()
# one learner of each kind in `make test`; every experiment in `make test-long`
FAST = {"ad_darkroom", "dpt_bandit", "transformer_ppo_bandit"}
EXPERIMENTS = [
    name if name in FAST else pytest.param(name, marks=pytest.mark.long)
    for name in sorted(CONFIGS)
]
SETTINGS = settings(
    max_examples=12,
    deadline=None,
    database=None,  # nothing written into the checkout
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

WORD = st.from_regex(r"[a-z][a-z_]{0,7}", fullmatch=True).filter(
    lambda w: w not in ("none", "null", "true", "false", "nan", "inf")
)
NUMBER_TEXT = st.one_of(
    st.integers(-(10**6), 10**6).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
)


def bad_value(kind: str) -> st.SearchStrategy:
    """Values (command-line text, or Python values for WRONG_TYPE) of ``kind``."""
    return {
        NOT_A_NUMBER: WORD,
        FRACTIONAL: st.floats(-1e6, 1e6).filter(lambda x: x != int(x)).map(repr),
        NEGATIVE: st.one_of(
            st.integers(max_value=-1).map(str),
            st.floats(max_value=-1e-9, allow_infinity=False).map(repr),
        ),
        NON_FINITE: st.sampled_from(["nan", "inf", "-inf", "1e999", "-1e400", "NaN"]),
        NOT_A_BOOL: st.one_of(WORD, st.integers(-5, 5).map(str)),
        WRONG_TYPE: st.one_of(
            st.integers(),
            st.floats(allow_nan=False),
            st.lists(st.integers()),
            st.none(),
        ),
        NOT_A_CHOICE: WORD.map(lambda w: "zz" + w),
        NOT_PAIRS: st.one_of(WORD, st.lists(st.integers(), min_size=1).map(str)),
        BAD_NAME: st.one_of(
            st.just(""),
            WORD.map(lambda w: "../" + w),
            WORD.map(lambda w: w + "/" + w),
            WORD.map(lambda w: "." + w),
            WORD.map(lambda w: w + " " + w),
        ),
        UNKNOWN_ALGO: WORD.map(lambda w: "zz" + w),
    }[kind]


def _negative_fits(kind: str, path: str) -> str:
    # a negative moe_layers entry is a list of ints on the command line
    return kind if not (kind == NEGATIVE and path.endswith("moe_layers")) else "list"


def _value(data, kind: str, path: str):
    if _negative_fits(kind, path) == "list":
        return data.draw(st.lists(st.integers(max_value=-1), min_size=1).map(str))
    return data.draw(bad_value(kind), label=f"{path} ({kind})")


def _named(path: str, message: str) -> bool:
    leaf = path.split(".")[-1]
    return leaf in message or path in message


@pytest.mark.parametrize("name", EXPERIMENTS)
@SETTINGS
@given(data=st.data())
def test_every_field_refuses_generated_bad_values(name, data):
    config = CONFIGS[name]
    for path, kinds in field_kinds(config).items():
        for kind in kinds:
            value = _value(data, kind, path)
            with pytest.raises(ValueError) as info:
                configtools.override(config, {path: value})
            assert _named(path, str(info.value)), (path, kind, value, info.value)


@pytest.mark.parametrize("name", EXPERIMENTS)
@SETTINGS
@given(data=st.data())
def test_command_line_fields_refuse_generated_bad_values(name, data, capsys):
    """One generated (field, kind, value) per example, through ``agentrl train``."""
    config = CONFIGS[name]
    cases = [
        (p, k) for p, ks in field_kinds(config).items() for k in ks if k != WRONG_TYPE
    ]
    path, kind = data.draw(st.sampled_from(cases), label="field and kind")
    value = _value(data, kind, path)
    try:
        code = main(["train", name, f"--{path}={value}", "--run-dir", "/dev/null/x"])
    except SystemExit as exit_info:
        code = exit_info.code
    err = capsys.readouterr().err
    assert code == 2, (path, kind, value, err)
    assert err.startswith("agentrl train: error:") and "Traceback" not in err, err
    assert _named(path, err), (path, value, err)


def _bad_argument(minimum) -> st.SearchStrategy:
    if minimum == "fraction":
        out_of_range = st.one_of(
            st.floats(max_value=0.0, allow_nan=False), st.floats(min_value=1.0)
        ).map(repr)
    else:
        out_of_range = st.integers(max_value=minimum - 1).map(str)
    return st.sampled_from(CLI_ARG_KINDS).flatmap(
        lambda kind: out_of_range if kind == "out_of_range" else WORD
    )


@pytest.mark.parametrize(
    "prefix, argument, minimum", CLI_ARGS, ids=[f"{p} {a}" for p, a, _ in CLI_ARGS]
)
@settings(SETTINGS, max_examples=8)
@given(data=st.data())
def test_command_arguments_refuse_generated_bad_values(
    prefix, argument, minimum, data, capsys, tmp_path_factory
):
    tmp = tmp_path_factory.getbasetemp()
    places = {"tmp": str(tmp / "unused"), "run": str(tmp / "no-run")}
    value = data.draw(_bad_argument(minimum), label=argument)
    argv = [*shlex.split(prefix.format(**places)), f"{argument}={value}"]
    try:
        code = main(argv)
    except SystemExit as exit_info:
        code = exit_info.code
    err = capsys.readouterr().err
    assert code == 2, (argv, err)
    assert "error:" in err and "Traceback" not in err, err
    assert argument in err, (argument, err)
