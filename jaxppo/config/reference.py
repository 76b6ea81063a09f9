"""The config reference: every key's type, default and meaning, read from `PPOConfig` itself.

A key's meaning is written once, as the docstring under its field; `jaxppo config --list` prints
`config_reference()` and the README's table is `config_reference_markdown()` (a test keeps the
README equal to it), so neither can drift from the schema.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import textwrap
import typing
from typing import Any

import yaml

from jaxppo.config.schema import FIELDS, PPOConfig, thaw

_HINTS = typing.get_type_hints(PPOConfig)


def _field_docs() -> dict[str, str]:
    """Each field's docstring (the string under it in `PPOConfig`), read from the source: the
    one place a key's meaning is written."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(PPOConfig)))
    body = tree.body[0].body
    docs = {}
    for node, after in zip(body, body[1:], strict=False):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(
                after, ast.Expr) and isinstance(after.value, ast.Constant):
            docs[node.target.id] = " ".join(str(after.value.value).split())
    return docs


def _type_text(hint: Any) -> str:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if len(args) < len(typing.get_args(hint)):  # Optional
        return f"{_type_text(args[0])} or null"
    if typing.get_origin(hint) is dict:
        return "mapping"
    if typing.get_origin(hint) is tuple:  # tuple[X, ...]: a YAML list of X
        return f"list of {_type_text(typing.get_args(hint)[0])}"
    return hint.__name__


def _default_text(field: dataclasses.Field) -> str:
    value = field.default_factory() if field.default is dataclasses.MISSING else field.default
    return yaml.safe_dump(thaw(value), default_flow_style=True, width=10**6).strip().removesuffix(
        "\n...").strip()


def config_reference() -> list[tuple[str, str, str, str]]:
    """`(key, type, default, meaning)` for every config key, in `PPOConfig`'s order: the type
    from its annotation, the default as YAML writes it, and the first sentence of its docstring.
    `jaxppo config --list` prints it and the README's table is `config_reference_markdown()`."""
    docs = _field_docs()
    missing = [name for name in FIELDS if name not in docs]
    if missing:
        raise RuntimeError(f"PPOConfig fields without a docstring: {', '.join(missing)}")
    return [(name, _type_text(_HINTS[name]), _default_text(field),
             re.split(r"(?<=\.)\s+(?=[A-Z])", docs[name])[0])
            for name, field in FIELDS.items()]


def config_reference_markdown() -> str:
    """The README's table of config keys (a test keeps the README equal to it)."""
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for name, kind, default, meaning in config_reference():
        cells = [f"`{name}`", kind, f"`{default}`", meaning.replace("|", "\\|")]
        rows.append(f"| {' | '.join(cells)} |")
    return "\n".join(rows)
