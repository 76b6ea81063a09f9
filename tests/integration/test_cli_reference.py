"""The generated references say what the code does: each flag's default and meaning as
`--help` gives them (the CLI page listed `eval --stochastic` and `--no-json` with default True,
and "95%%" literally), eval's default mode is stated in `--help`, in eval.json and by `jaxppo
report` (greedy or sampled), and `jaxppo --version` exists."""

import argparse
import importlib.util
import json
import os
import re
import tomllib

import numpy as np
import pytest
from conftest import ROOT, make_run

import jaxppo
from jaxppo import report
from jaxppo.cli import build_parser, main
from jaxppo.policy.evaluate import EvalResult
from jaxppo.writes import write_whole

spec = importlib.util.spec_from_file_location(
    "docs_generate", os.path.join(ROOT, "docs", "_hooks", "generate.py"))
generate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(generate)


def parsers():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [("jaxppo", parser), *((f"jaxppo {n}", v) for n, v in sub.choices.items())]


def squash(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("name,parser", parsers(), ids=[n for n, _ in parsers()])
def test_each_flag_row_says_what_help_says(name, parser):
    shown = "".join(parser.format_help().split())  # argparse wraps at hyphens too
    actions = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)
               and a.help != argparse.SUPPRESS]
    rows = generate.flag_rows(parser)
    assert len(rows) == len(actions)
    for a, (flag, default, meaning) in zip(actions, rows, strict=True):
        assert "".join(meaning.split()) in shown, (name, flag, meaning)  # the meaning --help prints, expanded
        assert "%%" not in meaning and "%(" not in meaning, (name, flag)
        if a.nargs == 0:  # a switch: its default is being left off, never "True"
            assert default == "", (name, flag, default)
            continue
        # "(default a,b,c)" (a list, commas and all) or "(default 0, the first)"
        stated = (re.search(r"\(default:? ([^\s;:)]+)\)", a.help or "")
                  or re.search(r"\(default:? ([^\s,;:)]+)[),;]", a.help or ""))
        if default and stated:
            assert default == f"`{stated.group(1)}`", (name, flag, default, a.help)
        if default:
            assert default == f"`{a.default}`", (name, flag)


def test_the_cli_page_has_no_true_default_and_no_double_percent():
    page = generate._cli()
    assert "%%" not in page and "95% bootstrap" in page
    for flag in ("`--stochastic`", "`--no-json`", "`--deterministic`"):
        row = next(line for line in page.splitlines() if line.startswith(f"| {flag} "))
        assert row.split(" | ")[1] == "", row
    assert "`--version`" in page


def test_eval_help_states_its_default_mode():
    sub = dict(parsers())["jaxppo eval"]
    text = squash(sub.format_help())
    assert "greedy actions: the policy's most likely action" in text and "the default" in text
    assert "sample actions from the policy instead (default: greedy)" in text


@pytest.mark.parametrize("deterministic,actions", [(True, "greedy"), (False, "sampled")])
def test_eval_json_and_the_report_say_greedy_or_sampled(tmp_path, deterministic, actions):
    res = EvalResult(np.array([[1.0, 3.0], [2.0, 4.0]]), np.ones((2, 2), int), "CartPole-v1",
                     12, 0, deterministic)
    data = res.to_dict()
    assert data["actions"] == actions and data["deterministic"] is deterministic
    run = make_run(tmp_path / "a", final=(1.0, 2.0))
    write_whole(os.path.join(run, "eval.json"), json.dumps(data), "eval.json")
    rep = report(run, tmp_path / "out", reps=50)
    assert rep.data["groups"][0]["source"] == f"eval.json ({actions})"
    table = rep.table()
    assert f"eval.json ({actions})" in table
    assert ("played greedily" if deterministic else "--stochastic") in table


def test_version_prints_jaxppo_and_jax(capsys):
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        version = tomllib.load(f)["project"]["version"]
    assert jaxppo.__version__ == version
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"jaxppo {version} (JAX ") and "jaxlib" in out


def test_each_config_key_type_fits_its_default_and_its_values():
    """The config reference's type column, held to the schema: every default is of the type
    the row names, and a list key's items are (env_imports was typed "list of int")."""
    from jaxppo.config.reference import config_reference
    from jaxppo.config.schema import FIELDS, PPOConfig

    kinds = {"str": str, "int": int, "float": float, "bool": bool, "mapping": dict}
    for key, kind, _, _ in config_reference():
        field = FIELDS[key]
        value = getattr(PPOConfig(), key)
        base, _, null = kind.partition(" or ")
        if value is None:
            assert null == "null", (key, kind)
            continue
        if base.startswith("list of "):
            item = kinds[base.removeprefix("list of ")]
            assert isinstance(value, tuple) and all(type(v) is item for v in value), (key, kind)
            continue
        assert type(value) is kinds[base] or (kinds[base] is dict and isinstance(
            value, dict)), (key, kind, value, field.type)
    rows = {r[0]: r[1] for r in config_reference()}
    assert rows["env_imports"] == "list of str" and rows["hidden_sizes"] == "list of int"
