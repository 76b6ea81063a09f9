"""MkDocs hooks: the reference pages that are generated from the code, so the site cannot
drift from it. A page holds a marker `<!-- generated: NAME -->` where the generated text goes:

- `cli`: every verb and flag of `jaxppo`, from the argparse parser itself;
- `config-keys`: every config key, from `PPOConfig`'s field docstrings;
- `metrics`: every logged metric with its TensorBoard tag, from `jaxppo.core.metrics`;
- `api-check` (on the API page): fails the build when a name of `jaxppo.__all__` has no
  `::: jaxppo.NAME` entry there.

After the build the benchmark plots are drawn again from their recorded numbers
(`scripts/benchmark_plots.py --out SITE/benchmarks/img`).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import subprocess
import sys

log = logging.getLogger("mkdocs.plugins.jaxppo")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MARKER = re.compile(r"<!-- generated: ([a-z-]+) -->")
if ROOT not in sys.path:  # the checkout being documented, before any installed jaxppo
    sys.path.insert(0, ROOT)


def flag_rows(parser: argparse.ArgumentParser) -> list[tuple[str, str, str]]:
    """`(flag, default, meaning)` of each of `parser`'s arguments, as its `--help` gives them:
    the meaning is argparse's own expansion of the help (`%(default)s`, `95%%` -> `95%`); the
    default is the value the parser fills in for a flag that takes one, none for a switch
    (`--stochastic`, `--no-json`: the default is the switch left off, whatever dest holds)."""
    formatter = parser._get_formatter()
    rows = []
    for a in parser._actions:
        if isinstance(a, argparse._HelpAction) or a.help == argparse.SUPPRESS:
            continue
        flag = ", ".join(f"`{o}`" for o in a.option_strings) or f"`{a.dest}`"
        if a.metavar and a.option_strings:
            flag += f" `{a.metavar}`"
        elif a.choices and a.option_strings:
            flag += " `{" + ",".join(map(str, a.choices)) + "}`"
        switch = a.nargs == 0 or isinstance(a, argparse._VersionAction)
        default = ("" if switch or a.default in (None, [], argparse.SUPPRESS)
                   else f"`{a.default}`")
        text = formatter._expand_help(a) if a.help else ""
        rows.append((flag, default, " ".join(text.split())))
    return rows


def _table(rows: list[tuple[str, str, str]]) -> str:
    lines = ["| flag | default | meaning |", "|---|---|---|"]
    lines += [f"| {f} | {d} | {m.replace('|', chr(92) + '|')} |" for f, d, m in rows]
    return "\n".join(lines) + "\n"


def _cli() -> str:
    from jaxppo.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    formatter = parser._get_formatter()
    helps = {c.dest: formatter._expand_help(c) if c.help else "" for c in sub._choices_actions}
    out = ["## `jaxppo`\n\nOptions before the verb.\n",
           _table([r for r in flag_rows(parser) if r[0] != "`command`"])]
    for name, verb in sub.choices.items():
        out.append(f"## `jaxppo {name}`\n\n{helps.get(name) or ''}\n")
        out.append(f"```text\n{verb.format_usage().strip()}\n```\n")
        out.append(_table(flag_rows(verb)))
    return "\n".join(out)


def _config_keys() -> str:
    from jaxppo.config import config_reference_markdown

    return config_reference_markdown()


def _metrics() -> str:
    from jaxppo.core.metrics import METRICS

    rows = ["| metric (`metrics.csv` column) | TensorBoard / W&B tag | logged |", "|---|---|---|"]
    for m in METRICS:
        tag = f"`{m.tb_tag}`" if m.tb_tag else "(not in TensorBoard)"
        when = "where an episode ended" if m.per_episode else "every update"
        rows.append(f"| `{m.name}` | {tag} | {when} |")
    return "\n".join(rows)


GENERATORS = {"cli": _cli, "config-keys": _config_keys, "metrics": _metrics}


def on_page_markdown(markdown: str, page, config, files) -> str:
    def fill(m: re.Match) -> str:
        name = m.group(1)
        if name == "api-check":
            import jaxppo

            folder = os.path.dirname(page.file.abs_src_path)
            entries = "".join(open(os.path.join(folder, f), encoding="utf-8").read()
                              for f in sorted(os.listdir(folder)) if f.endswith(".md"))
            missing = [n for n in jaxppo.__all__ if f"::: jaxppo.{n}\n" not in entries]
            if missing:
                log.warning("the API reference has no page for jaxppo.%s", ", jaxppo.".join(missing))
            return ""
        if name not in GENERATORS:
            log.warning("%s: unknown generated section %r", page.file.src_path, name)
            return m.group(0)
        return GENERATORS[name]()
    return MARKER.sub(fill, markdown)


def on_post_build(config) -> None:
    script = os.path.join(ROOT, "scripts", "benchmark_plots.py")
    if not os.path.exists(script):
        return
    out = os.path.join(config["site_dir"], "benchmarks", "img")
    p = subprocess.run([sys.executable, script, "--out", out], capture_output=True, text=True)
    if p.returncode != 0:
        log.warning("scripts/benchmark_plots.py failed: %s", (p.stderr or p.stdout).strip()[-500:])
