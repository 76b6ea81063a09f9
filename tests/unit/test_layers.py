"""The house's rules, read from the code (docs/contributing.md): every module imports only
from its own layer or those below; no import cycle between modules; no function-level import
of a jaxppo module but the allowed few (each with its reason); no module over 450 lines; no
module outside jaxppo/rundir/ names a run directory's file."""

import ast
import pathlib
import re

import pytest
from conftest import ROOT

from jaxppo.rundir import names as run_dir_names

pytestmark = pytest.mark.unit

PKG = pathlib.Path(ROOT) / "jaxppo"
LAYERS = ["errors keys compat machine _xla plots labels process writes", "envs", "config", "core",
          "rundir", "run", "search", "policy reports compare profile", "cli"]
RANK = {name: i for i, names in enumerate(LAYERS) for name in names.split()}
# function-level imports of jaxppo modules, and why they cannot be at the top
DEFERRED = {
    # importing the probes imports gymnax, which starts JAX's backend: that must wait for
    # jax.distributed.initialize in a multi-process run
    ("jaxppo.envs.registry", "jaxppo.envs.probes"),
    # the SB3 side imports torch and stable-baselines3 (the compare extra)
    ("jaxppo.compare.sb3_run", "jaxppo.compare.sb3"),
    # the Tianshou, TorchRL and torch-script systems import torch and their library (the
    # compare extra), only in the process that runs that system
    ("jaxppo.compare.torch_child", "jaxppo.compare"),
}


def modules():
    for f in sorted(PKG.rglob("*.py")):
        name = ".".join(f.relative_to(PKG.parent).with_suffix("").parts).removesuffix(".__init__")
        yield name, f, ast.parse(f.read_text(encoding="utf-8"))


def imports(tree, top_level: bool):
    body = tree.body if top_level else [n for n in ast.walk(tree)
                                        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    nodes = body if top_level else [m for fn in body for m in ast.walk(fn)]
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jaxppo"):
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("jaxppo"))


def layer(module: str) -> int | None:
    parts = module.split(".")
    return RANK.get(parts[1]) if len(parts) > 1 else None


def test_every_import_points_down_or_sideways():
    up = [(name, m) for name, _, tree in modules() for m in imports(tree, True)
          if layer(name) is not None and layer(m) is not None and layer(m) > layer(name)]
    assert not up, up


def test_no_import_cycle_between_modules():
    graph = {name: {m for m in imports(tree, True) if m != name} for name, _, tree in modules()}
    done, path = set(), []

    def visit(node):
        if node in path:
            raise AssertionError(" -> ".join(path[path.index(node):] + [node]))
        if node in done or node not in graph:
            return
        path.append(node)
        for nxt in graph[node]:
            if nxt != "jaxppo":  # the package face imports everything; nothing imports it
                visit(nxt)
        path.pop()
        done.add(node)

    for name in graph:
        visit(name)


def test_function_level_imports_are_only_the_deferred_few():
    found = {(name, m) for name, _, tree in modules() for m in imports(tree, False)}
    assert found <= DEFERRED, found - DEFERRED


def test_no_module_over_450_lines():
    long = {str(f.relative_to(PKG)): n for _, f, _ in modules()
            if (n := len(f.read_text(encoding="utf-8").splitlines())) > 450}
    assert not long, long


def test_no_script_over_450_lines():
    """scripts/ holds benchmark drivers only, each under the house's limit (a user feature
    belongs in the package: the deviceless profile is `jaxppo profile`)."""
    long = {f.name: n for f in sorted((PKG.parent / "scripts").glob("*.py"))
            if (n := len(f.read_text(encoding="utf-8").splitlines())) > 450}
    assert not long, long


def _strings(tree):
    """The string constants of a module that are not docstrings (names used as data)."""
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)
            and isinstance(n.value, ast.Constant)}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and id(n) not in docs]


FILE_NAME = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, run_dir_names.FILES))
                       + r")(?![\w])")


def _naming(strings):
    """The strings that name a file of the run directory as a word: the whole string, a path
    ending in one, or a message that mentions one (each must come from its constant)."""
    return [s for s in strings if FILE_NAME.search(s)]


def test_only_rundir_names_run_directory_files():
    """A file of the run directory is named by its constant (`jaxppo.rundir.names`) outside
    the layer that owns the formats: in a string that is such a name, a path ending in one,
    and a message or help text that mentions one (f-strings' literal parts included)."""
    found = sorted({(name, s) for name, _, tree in modules()
                    if not name.startswith("jaxppo.rundir")
                    for s in _naming(_strings(tree))})
    assert not found, found


def test_the_name_check_sees_a_literal():
    """The check above finds a name written as data, as a path, or inside a message (a plain
    string or an f-string's text), and not one in a docstring (which may say why)."""
    tree = ast.parse('"""metrics.csv in prose"""\n'
                     'def f(run):\n    """Reads summary.json."""\n'
                     '    x = "summary.json"\n    y = "a/eval.json"\n'
                     '    z = "no metrics.csv, so no curve"\n'
                     '    w = f"{run}: eval.json was played"\n'
                     '    v = "my_metrics.csv or metrics.csvx or run.eval.json"\n')
    assert _naming(_strings(tree)) == ["summary.json", "a/eval.json", "no metrics.csv, so no curve",
                                       ": eval.json was played"]


FOLDERS = {run_dir_names.CHECKPOINT_DIR, run_dir_names.TB_DIR, run_dir_names.EXPORT_DIR,
           run_dir_names.REPORT_DIR}
"""The run directory's folders: common words ("checkpoint", "report"), so they are looked for
where a path is built (`os.path.join`'s arguments, and a tuple of path parts)."""


def _joined_folders(tree):
    """The string constants naming a run-directory folder as a path part."""
    found = []
    for node in ast.walk(tree):
        parts = (node.args if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                 and node.func.attr == "join" else node.elts if isinstance(node, ast.Tuple)
                 else ())
        found += [p.value for p in parts if isinstance(p, ast.Constant) and p.value in FOLDERS]
    return found


def test_only_rundir_builds_paths_to_run_directory_folders():
    found = sorted({(name, s) for name, _, tree in modules()
                    if not name.startswith("jaxppo.rundir") for s in _joined_folders(tree)})
    assert not found, found
    assert _joined_folders(ast.parse('os.path.join(run, "checkpoint")\nfor p in ("tb", x): 0\n'
                                     'kwargs.pop("checkpoint")\n')) == ["checkpoint", "tb"]


def test_readers_of_a_run_directory_import_nothing_from_search():
    """Readers of a run directory (policy/, reports/, `jaxppo eval`) go through
    `jaxppo.rundir` (the record's ledger), never a search's controller."""
    up = [(name, m) for name, _, tree in modules() for m in imports(tree, True)
          if (name.split(".")[1:2] in (["policy"], ["reports"]) or name == "jaxppo.cli.eval")
          and m.startswith("jaxppo.search")]
    assert not up, up
