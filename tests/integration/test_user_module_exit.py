"""A module of yours that ends the process (`sys.exit`, `raise KeyboardInterrupt`) when jaxppo
imports it, or an env that raises KeyboardInterrupt, is one line naming the module and what it
raised, with exit status 4: never 0 (success), 3 (diverged) or 128 + N (a signal). It used to
end train, eval, compare and resume silently with its own status (issue #54, item 1)."""

import gymnasium
import pytest
from faults_setup import CARTPOLE, TINY, cli, one_line
from test_host_env import Walk

from jaxppo import Experiment, PPOConfig
from jaxppo.errors import USER_CODE_EXIT, EnvError

pytestmark = pytest.mark.usefixtures("compile_cache")


@pytest.fixture
def module(tmp_path, monkeypatch):
    """write(name, body): a module `name` importable from the working directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(name, body):
        (tmp_path / f"{name}.py").write_text(body)
        return name
    return write


@pytest.mark.parametrize("body,what", [
    ("import sys\nsys.exit(0)\n", "SystemExit(0)"),
    ("import sys\nsys.exit(3)\n", "SystemExit(3)"),
    ("raise KeyboardInterrupt\n", "KeyboardInterrupt (no Ctrl-C came"),
], ids=["exit0", "exit3", "ctrl-c"])
def test_a_module_that_exits_at_import_is_one_line_and_status_4(module, capsys, tmp_path,
                                                                body, what):
    name = module(f"ends_{abs(hash(body)) % 10**6}", body)
    for argv in (["train", "--config", CARTPOLE, *TINY, "--import", name, "--logdir",
                  str(tmp_path), "--no-progress"],
                 ["eval", str(tmp_path / "none"), "--import", name],
                 ["compare", "--config", CARTPOLE, "--import", name, "--out",
                  str(tmp_path / "cmp")]):
        code, out, err = cli(capsys, *argv)
        assert code == USER_CODE_EXIT, (argv[0], code, err)
        one_line(err, f"importing module {name!r} raised {what}", "if __name__ ==")
        assert not (tmp_path / "cmp").exists()


def test_a_gymnasium_module_id_that_exits_is_one_line(module, capsys, tmp_path):
    name = module("gym_ends_3", "import sys\nsys.exit(3)\n")
    code, _, err = cli(capsys, "train", "--config", CARTPOLE, *TINY, "--set",
                       f"env_id=gymnasium/{name}:X-v0", "--logdir", str(tmp_path),
                       "--no-progress")
    assert code == USER_CODE_EXIT
    one_line(err, f"importing module {name!r} raised SystemExit(3)")


def test_a_module_whose_own_dependency_is_missing_says_so(module, capsys, tmp_path):
    """Item 9: reported as 'cannot import the module' (run from its folder...), which it was."""
    name = module("needs_dep", "import no_such_dependency_54\n")
    code, _, err = cli(capsys, "train", "--config", CARTPOLE, *TINY, "--import", name,
                       "--logdir", str(tmp_path), "--no-progress")
    assert code == 2
    one_line(err, f"module {name!r} was found", "'no_such_dependency_54', which is not installed")


class Interrupts(Walk):
    def step(self, action):
        self.calls += 1
        if self.calls >= 20:
            raise KeyboardInterrupt
        return super().step(action)


def test_an_env_that_raises_keyboard_interrupt_is_no_ctrl_c(tmp_path):
    """Reproduction: the env's own KeyboardInterrupt was reported as a Ctrl-C that never came
    (`stopped at once by SIGINT`)."""
    gymnasium.register("test/Interrupts-v0", entry_point=Interrupts, max_episode_steps=6)
    config = PPOConfig(env_id="gymnasium/test/Interrupts-v0", total_timesteps=256, num_envs=4,
                       num_steps=8, num_minibatches=2, update_epochs=1, hidden_sizes=(8,))
    with pytest.raises(EnvError, match="KeyboardInterrupt .no Ctrl-C came"):
        Experiment(config, logdir=str(tmp_path), progress=False, chunk_updates=1).run()


class InterruptsAtBuild(Walk):
    def __init__(self, **kw):
        raise KeyboardInterrupt


def test_an_env_constructor_that_raises_keyboard_interrupt_is_no_ctrl_c(tmp_path, capsys):
    gymnasium.register("test/InterruptsAtBuild-v0", entry_point=InterruptsAtBuild)
    code, _, err = cli(capsys, "train", "--config", CARTPOLE, *TINY, "--set",
                       "env_id=gymnasium/test/InterruptsAtBuild-v0", "--logdir", str(tmp_path),
                       "--no-progress")
    assert code == 2, err
    one_line(err, "raised KeyboardInterrupt (no Ctrl-C came")
