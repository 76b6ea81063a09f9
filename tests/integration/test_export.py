"""`jaxppo export` / `jaxppo.export_policy`: a trained policy as an ONNX model and as a
`jax.export` program, each run where jaxppo is not (ONNX Runtime, and plain JAX in a process
that never imports jaxppo), acting as `load_policy(...).act` does on recorded observations:
equal actions, logits and means within 1e-5. Every policy family (discrete, continuous,
multi-discrete, masked, recurrent, conv torsos) exports, deterministic and stochastic; bad
input is one line."""

import json
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ROOT, run_cli

from jaxppo import (
    Experiment,
    PPOConfig,
    UsageError,
    evaluate,
    export_policy,
    load_config,
    load_policy,
    make_train,
)
from jaxppo.cli import main
from jaxppo.core.networks import make_network
from jaxppo.core.normalize import RunningMeanStd, rms_normalize
from jaxppo.envs import Box, Discrete, MultiDiscrete, VecEnv, register_env
from jaxppo.errors import CheckpointError
from jaxppo.policy import DivergedAgent
from jaxppo.rundir.checkpoint import save_checkpoint
from jaxppo.rundir.plan import FILE as PLAN

onnxruntime = pytest.importorskip("onnxruntime", reason="the export extra is not installed")
pytestmark = pytest.mark.usefixtures("compile_cache")
TINY = dict(num_envs=4, num_steps=16, num_minibatches=2, update_epochs=1, total_timesteps=128,
            hidden_sizes=(16, 16))

# Acts every exported model of a list on its recorded observations (a recurrent one from a zero
# carry, fed its own carry back), in plain JAX or ONNX Runtime: never jaxppo.
PLAIN = r'''
import json, sys
import numpy as np

for job in json.load(open(sys.argv[1])):
    side = json.load(open(job["model"] + ".json"))
    data = dict(np.load(job["inputs"]))
    if side["format"] == "jax":
        import jax
        exported = jax.export.deserialize(bytearray(open(job["model"], "rb").read()))
        run = lambda feed: {k: np.asarray(v) for k, v in exported.call(feed).items()}
    else:
        import onnxruntime
        session = onnxruntime.InferenceSession(job["model"])
        names = [o.name for o in session.get_outputs()]
        run = lambda feed: dict(zip(names, session.run(None, feed)))
    steps, batch = data["obs"].shape[:2]
    carry = {name: np.zeros((batch, side["recurrent"]["size"]), np.float32)
             for name in (side["recurrent"] or {}).get("carry", [])}
    outs = []
    for t in range(steps):
        feed = {k: v[t] for k, v in data.items()}
        out = run({**feed, **carry})
        carry = {name: out[name + "_out"] for name in carry}
        outs.append(out)
    np.savez(job["out"], **{k: np.stack([o[k] for o in outs]) for k in outs[0]})
assert "jaxppo" not in sys.modules, sorted(m for m in sys.modules if "jaxppo" in m)
print("plain", len(sys.modules))
'''


def run_plain(tmp_path, jobs: list[dict]) -> list[dict]:
    """Run `PLAIN` on `jobs` ({"model", "inputs"}) in a fresh interpreter; their outputs."""
    for i, job in enumerate(jobs):
        job["out"] = str(tmp_path / f"out-{i}.npz")
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # not even findable
    p = subprocess.run([sys.executable, "-c", PLAIN, str(tmp_path / "jobs.json")], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.startswith("plain"), p.stdout
    return [dict(np.load(job["out"])) for job in jobs]


def record(policy, steps: int = 10, envs: int = 100, seed: int = 0) -> dict:
    """`envs` envs played for `steps` steps by `policy.act` (1,000 observations): per step the
    observation, mask, action, the state before and the distribution's logits or mean."""
    env = VecEnv.from_config(policy.config, envs)
    network = make_network(policy.config, env)
    ts = policy.train_state
    reset, step_envs = jax.jit(env.reset), jax.jit(env.step)  # one program each, not one per op
    obs, state = reset(jax.random.key(seed))
    carry = policy.initial_state(envs) if policy.recurrent else None
    rows = []
    for t in range(steps):
        mask = env.action_mask(state)
        x = rms_normalize(ts.normalizer.obs, obs) if policy.config.normalize_obs else obs
        row = {"obs": np.asarray(obs, np.uint8 if obs.dtype == jnp.uint8 else np.float32)}
        if mask is not None:
            row["mask"] = np.asarray(mask)
        if policy.recurrent:
            dist, _, _ = network.apply(ts.params, x, carry, jnp.zeros((envs,), bool), mask)
            row["carry"] = [np.asarray(c) for c in jax.tree.leaves(carry)]
            action, carry = policy.act(obs, mask=mask, state=carry)
        else:
            dist = network.apply(ts.params, x, mask, method="policy")
            action = policy.act(obs, mask=mask)
        row["action"] = np.asarray(action)
        row["dist"] = np.asarray(dist.mean if env.action_low is not None else dist.logits)
        rows.append(row)
        state, step = step_envs(jax.random.fold_in(jax.random.key(seed + 1), t), state, action)
        obs = step.obs
    return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


def check_outputs(got: dict, want: dict, discrete: bool, recurrent: bool) -> None:
    if discrete:
        np.testing.assert_array_equal(got["action"], want["action"])
        np.testing.assert_allclose(got["logits"], want["dist"], atol=1e-5, rtol=0)
    else:
        np.testing.assert_allclose(got["action"], want["action"], atol=1e-5, rtol=0)
        np.testing.assert_allclose(got["mean"], want["dist"], atol=1e-5, rtol=0)
    if recurrent:  # the carry the model fed itself is the state act was given next
        carries = sorted(k for k in got if k.endswith("_out"))
        for i, name in enumerate(carries):
            np.testing.assert_allclose(got[name][:-1], want["carry"][1:, i], atol=1e-5, rtol=0)


def trained(tmp_path_factory, name: str, seeds: int = 1, **overrides) -> str:
    """A tiny trained run of `overrides`, written as `jaxppo train` writes one."""
    logdir = tmp_path_factory.mktemp(name)
    Experiment(PPOConfig(**{**TINY, **overrides}), seeds=seeds, logdir=str(logdir),
               run_name="run", progress=False, tensorboard=False).run()
    return str(logdir / "run")


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    """Two vmapped seeds of CartPole with observation normalisation; agent 1 is exported."""
    return trained(tmp_path_factory, "cartpole", seeds=2, env_id="CartPole-v1",
                   normalize_obs=True), 1


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory):
    return trained(tmp_path_factory, "pendulum", env_id="Pendulum-v1", normalize_obs=True), 0


@pytest.fixture(scope="module")
def minatar_cnn(tmp_path_factory):
    return trained(tmp_path_factory, "minatar", env_id="Breakout-MinAtar", torso="cnn",
                   activation="relu"), 0


@pytest.fixture(scope="module")
def gru(tmp_path_factory):
    return trained(tmp_path_factory, "gru", env_id="CartPole-v1", network="gru", rnn_size=16,
                   normalize_obs=True), 0


def swept(tmp_path_factory, name: str, search: list[str], updates: int = 8) -> str:
    """A tiny CartPole sweep of `search`, written as `jaxppo sweep` writes one."""
    logdir = tmp_path_factory.mktemp(name)
    sets = (f"total_timesteps={64 * updates}", "num_envs=4", "num_steps=16",
            "hidden_sizes=[16,16]", "normalize_obs=true")
    code = main(["sweep", "--config", os.path.join(ROOT, "configs", "cartpole.yaml"),
                 *(a for s in sets for a in ("--set", s)), *search, "--space",
                 "lr=1e-4:1e-2:log", "--logdir", str(logdir), "--run-name", name,
                 "--no-progress", "--no-tensorboard"])
    assert code == 0
    return str(logdir / name)


@pytest.fixture(scope="module")
def pbt_member(tmp_path_factory):
    """A PBT sweep of 4 members, exploits every 2 updates; member 2 is exported."""
    return swept(tmp_path_factory, "pbt", ["--search", "pbt", "--population", "4",
                                           "--interval", "2"]), 2


@pytest.fixture(scope="module")
def halving_member(tmp_path_factory):
    """A halving sweep of 2 agents (eta 2): one stopped at the first rung, which is exported.
    Two agents are the fewest with a stopped one; more rungs would compile more programs and
    stop agents the same way."""
    run = swept(tmp_path_factory, "halving", ["--search", "halving", "--trials", "2", "--eta",
                                              "2"])
    policies = [load_policy(run, i) for i in range(2)]
    stopped = [p.seed for p in policies if p.trained_updates < p.update]
    assert stopped, [p.trained_updates for p in policies]
    return run, stopped[0]


@pytest.mark.parametrize("family", ["cartpole", "pendulum", "minatar_cnn", "gru", "pbt_member",
                                    "halving_member"])
def test_exports_act_as_the_policy_without_jaxppo(family, request, tmp_path, capsys):
    """Both formats, under ONNX Runtime and plain JAX in a process without jaxppo: the actions
    of `load_policy(...).act` on 1,000 recorded observations; logits and means within 1e-5; a
    recurrent policy's carry, fed back, the state act carried."""
    run, agent = request.getfixturevalue(family)
    policy = load_policy(run, agent)
    want = record(policy)
    inputs = {"obs": want["obs"], **({"mask": want["mask"]} if "mask" in want else {})}
    np.savez(tmp_path / "inputs.npz", **inputs)
    jobs = []
    for fmt in ("onnx", "jax"):
        out = str(tmp_path / f"policy.{fmt}")
        code, err = run_cli(capsys, ["export", run, "--format", fmt, "--agent", str(agent),
                                     "--out", out])
        assert code == 0, err
        jobs.append({"model": out, "inputs": str(tmp_path / "inputs.npz")})
    env = VecEnv.from_config(policy.config, 1)
    for got in run_plain(tmp_path, jobs):
        check_outputs(got, want, env.discrete, policy.recurrent)
    side = json.loads(open(jobs[0]["model"] + ".json").read())
    assert side["env_id"] == policy.config.env_id and side["source"]["agent"] == agent
    assert side["format"] == "onnx" and side["deterministic"] is True
    assert side["source"]["update"] == policy.update
    assert side["source"]["trained_updates"] == policy.trained_updates  # a halving agent's rung
    assert [p["name"] for p in side["inputs"]][0] == "obs"
    meta = onnxruntime.InferenceSession(jobs[0]["model"]).get_modelmeta().custom_metadata_map
    assert json.loads(meta["jaxppo"]) == side  # the model carries its sidecar too
    assert len(np.unique(want["action"])) > 1  # the policy's choice varies: the test can fail


def test_the_default_paths_and_stochastic_exports(cartpole, pendulum):
    """Without --out the files go to RUN_DIR/export/; a stochastic export takes the sample's
    noise as an input and gives `act(obs, key, deterministic=False)`'s sample for the noise
    `key` draws."""
    for run, agent in (cartpole, pendulum):
        policy = load_policy(run, agent)
        obs = record(policy, steps=1, envs=64)["obs"][0]
        env = VecEnv.from_config(policy.config, 1)
        key = jax.random.key(7)
        draw = jax.random.gumbel if env.discrete else jax.random.normal
        noise = np.asarray(draw(key, (64, env.action_dim)), np.float32)
        want = np.asarray(policy.act(obs, key, deterministic=False))
        for fmt in ("onnx", "jax"):
            result = export_policy(run, fmt, seed=agent, deterministic=False)
            suffix = ".onnx" if fmt == "onnx" else ".jaxexport"
            assert result.path == os.path.join(run, "export", f"agent{agent}-stochastic{suffix}")
            assert result.sidecar == result.path + ".json" and result.agent == agent
            got = act_in_process(result.path, {"obs": obs, "noise": noise})["action"]
            np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
        assert os.path.exists(os.path.join(run, "export", f"agent{agent}-stochastic.onnx.json"))


def act_in_process(path: str, feed: dict) -> dict:
    if path.endswith(".onnx"):
        session = onnxruntime.InferenceSession(path)
        names = [o.name for o in session.get_outputs()]
        return dict(zip(names, session.run(None, feed), strict=True))
    exported = jax.export.deserialize(bytearray(open(path, "rb").read()))
    return {k: np.asarray(v) for k, v in exported.call(feed).items()}


class _Flat:
    """One-step episodes of random observations: for exports of untrained networks."""

    default_params = None
    shape, dtype = (5,), jnp.float32

    def reset_env(self, key, params):
        return self.obs(key), jnp.int32(0)

    def obs(self, key):
        if self.dtype == jnp.uint8:
            return jax.random.randint(key, self.shape, 0, 256).astype(jnp.uint8)
        return jax.random.normal(key, self.shape)

    def step_env(self, key, state, action, params):
        return self.obs(key), state, jnp.float32(0.0), jnp.bool_(True), {}

    def observation_space(self, params):
        return Box(0, 255, self.shape, self.dtype) if self.dtype == jnp.uint8 else \
            Box(-5.0, 5.0, self.shape)


class _Masked(_Flat):
    def action_space(self, params):
        return Discrete(4)

    def action_mask(self, state, params):
        return jnp.array([True, False, True, True])


class _MaskedDials(_Flat):
    def action_space(self, params):
        return MultiDiscrete((3, 4))

    def action_mask(self, state, params):
        return jnp.array([True, True, False, False, True, True, True])


class _Frames(_Flat):
    shape, dtype = (36, 36, 2), jnp.uint8

    def action_space(self, params):
        return Discrete(3)


for _id, _cls in (("Masked", _Masked), ("MaskedDials", _MaskedDials), ("Frames", _Frames)):
    register_env(f"test/Export{_id}-v0", _cls)

FAMILIES = {
    "masked": dict(env_id="test/ExportMasked-v0", activation="silu", normalize_obs=True),
    "multidiscrete-masked": dict(env_id="test/ExportMaskedDials-v0", activation="gelu"),
    "lstm-continuous": dict(env_id="Pendulum-v1", network="lstm", rnn_size=8, activation="elu",
                            normalize_obs=True),
    "nature-cnn-shared-pixels": dict(env_id="test/ExportFrames-v0", torso="nature_cnn",
                                     shared_torso=True, activation="relu", hidden_sizes=(8,)),
    "gru-nature-cnn-normalized": dict(env_id="test/ExportFrames-v0", torso="nature_cnn",
                                      network="gru", rnn_size=8, hidden_sizes=(8,),
                                      normalize_obs=True),
}


def untrained(tmp_path, overrides: dict):
    """An untrained run of `overrides` with random parameters and a random normaliser (so
    neither can hide), saved as a checkpoint: the policy, its env and network."""
    config = PPOConfig(**{**TINY, **overrides})
    train = make_train(config)

    @jax.jit  # the whole setup as one program: run op by op, it compiles each op on its own
    def perturbed(seeds):
        runner = jax.vmap(train.init)(seeds)
        ts = runner.train_state
        leaves, tree = jax.tree.flatten(ts.params)
        keys = jax.random.split(jax.random.key(1), len(leaves))
        scale = lambda x: 1 / np.sqrt(np.prod(x.shape[:-1])) if x.ndim > 1 else 0.3  # O(1)
        params = jax.tree.unflatten(tree, [x + scale(x) * jax.random.normal(k, x.shape)
                                           for x, k in zip(leaves, keys, strict=True)])
        shape = ts.normalizer.obs.mean.shape
        rms = RunningMeanStd(50 * jax.random.normal(jax.random.key(2), shape),
                             jax.random.uniform(jax.random.key(3), shape, minval=1.0,
                                                maxval=900.0),
                             jnp.ones((1,)))
        ts = ts._replace(params=params, normalizer=ts.normalizer._replace(obs=rms))
        return runner._replace(train_state=ts)

    runner = perturbed(jax.random.split(jax.random.key(0), 1))
    save_checkpoint(str(tmp_path), runner, config, 0, 1)
    return load_policy(tmp_path), train.env


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_policy_family_exports(family, tmp_path):
    """Masks (an input), multi-discrete actions, an LSTM's two carries, continuous bounds,
    uint8 frames scaled or normalised, shared and recurrent conv torsos, every activation:
    both formats act as `act` does, deterministic and sampled."""
    policy, env = untrained(tmp_path, FAMILIES[family])
    b = 16
    obs, _ = jax.jit(VecEnv.from_config(policy.config, b).reset)(jax.random.key(4))
    obs = np.asarray(obs)
    feed = {"obs": obs}
    mask = None
    if env.masked:
        mask = np.array(jax.random.bernoulli(jax.random.key(5), 0.6, (b, env.action_dim)))
        mask[:, :1] = True  # every sub-space keeps a legal action
        if env.multi_discrete:
            mask[:, 3] = True
        feed["mask"] = mask
    state = None
    if policy.recurrent:
        state = jax.tree.map(lambda c: jax.random.normal(jax.random.key(6), c.shape),
                             policy.initial_state(b))
        names = ["carry"] if policy.config.network == "gru" else ["carry_c", "carry_h"]
        feed.update({n: np.asarray(c) for n, c in zip(names, jax.tree.leaves(state),
                                                       strict=True)})
    key = jax.random.key(8)
    draw = jax.random.gumbel if env.discrete else jax.random.normal
    noise = np.asarray(draw(key, (b, env.action_dim)), np.float32)
    for deterministic in (True, False):
        out = policy.act(obs, key, deterministic, mask=mask, state=state)
        want, next_state = out if policy.recurrent else (out, None)
        for fmt in ("onnx", "jax"):
            result = export_policy(tmp_path, fmt, out=tmp_path / f"p-{deterministic}.{fmt}",
                                   deterministic=deterministic)
            got = act_in_process(result.path, {**feed, **({} if deterministic
                                                          else {"noise": noise})})
            if env.discrete:
                np.testing.assert_array_equal(got["action"], want, err_msg=fmt)
            else:
                np.testing.assert_allclose(got["action"], want, atol=1e-5, rtol=0, err_msg=fmt)
            if next_state is not None:
                for name, c in zip(names, jax.tree.leaves(next_state), strict=True):
                    np.testing.assert_allclose(got[f"{name}_out"], c, atol=1e-5, rtol=0)
            side = json.loads(open(result.sidecar).read())
            assert [p["name"] for p in side["outputs"]] == list(
                _output_names(result.path, side))
    if env.masked:  # a masked action is never chosen, and its logit says so
        assert not (~mask & (got["logits"] > -1e8)).any()


def _output_names(path: str, side: dict) -> list[str]:
    if path.endswith(".onnx"):
        return [o.name for o in onnxruntime.InferenceSession(path).get_outputs()]
    return [p["name"] for p in side["outputs"]]  # a dict: its keys are checked by the call


def _one_line(capsys, argv, *words) -> None:
    code, err = run_cli(capsys, argv)
    assert code == 2 and len(err) == 1 and "Traceback" not in err[0], err
    assert all(w in err[0] for w in words), (words, err[0])


def test_bad_input_is_one_line(cartpole, tmp_path, capsys, monkeypatch):
    """No checkpoint, a diverged agent, an unknown format, a missing extra, an agent out of
    range, an unwritable --out, a static sweep's directory: one line each, exit 2, nothing
    written."""
    run, _ = cartpole
    _one_line(capsys, ["export", str(tmp_path / "nowhere")], "no checkpoint")
    _one_line(capsys, ["export", run, "--format", "tflite"], "invalid choice", "onnx", "jax")
    with pytest.raises(UsageError, match="format 'tflite': export writes onnx or jax"):
        export_policy(run, "tflite")
    _one_line(capsys, ["export", run, "--agent", "5"], "out of range")
    _one_line(capsys, ["export", run, "--out", str(tmp_path / "no" / "p.onnx")],
              "does not exist")
    with pytest.raises(CheckpointError):
        export_policy(tmp_path / "nowhere", "jax")
    # a sweep keeps training past a diverged agent and checkpoints its NaN parameters
    config = PPOConfig(env_id="CartPole-v1", **TINY)
    runner = jax.jit(jax.vmap(make_train(config).init))(jax.random.split(jax.random.key(0), 2))
    runner = runner._replace(train_state=runner.train_state._replace(params=jax.tree.map(
        lambda x: x.at[1].set(jnp.nan), runner.train_state.params)))
    (tmp_path / "sweep").mkdir()
    save_checkpoint(str(tmp_path / "sweep"), runner, config, 0, 2, allow_nonfinite=True)
    _one_line(capsys, ["export", str(tmp_path / "sweep"), "--agent", "1"],
              "agent 1", "diverged", "pick one that did not: 0")
    with pytest.raises(DivergedAgent):
        export_policy(tmp_path / "sweep", "jax", seed=1)
    assert export_policy(tmp_path / "sweep", "jax", seed=1, include_diverged=True).agent == 1
    monkeypatch.setitem(sys.modules, "onnx", None)  # the export extra, not installed
    _one_line(capsys, ["export", run, "--format", "onnx"], "pip install 'jaxppo[export]'",
              "--format jax")
    (tmp_path / "static").mkdir()
    (tmp_path / "static" / PLAN).write_text("{}")
    _one_line(capsys, ["export", str(tmp_path / "static"), "--format", "jax"],
              "sweep over static settings", "export from one of them")
    assert not os.path.exists(os.path.join(run, "export", "agent0.onnx"))


def how_to_block(marker: str) -> str:
    """The Python block of docs/how-to/export.md that holds `marker`."""
    text = open(os.path.join(ROOT, "docs", "how-to", "export.md"), encoding="utf-8").read()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if marker in b]
    assert len(blocks) == 1, marker
    return blocks[0]


@pytest.mark.slow
def test_the_how_to_loop_reaches_the_evaluated_return(tmp_path):
    """The how-to's ONNX Runtime loop, as printed, on Gymnasium's CartPole (no JAX, no jaxppo):
    a solved agent's return there is its `jaxppo eval` return."""
    config = load_config(os.path.join(ROOT, "configs", "cartpole_fast.yaml"))
    result = Experiment(config, logdir=str(tmp_path), run_name="run", progress=False,
                        tensorboard=False).run()
    evaluated = float(evaluate(result.run_dir, 10).returns.mean())
    assert evaluated >= 450, evaluated  # solved: the comparison means something
    export_policy(result.run_dir, "onnx")
    code = how_to_block("ort.InferenceSession(\"runs/<run-name>/export/agent0.onnx\")")
    code = code.replace("runs/<run-name>", result.run_dir)
    p = subprocess.run([sys.executable, "-c", code + "\nimport sys\nassert 'jax' not in sys.modules"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    got = float(re.search(r"return ([0-9.]+) over 10 episodes", p.stdout).group(1))
    assert got >= 0.95 * evaluated, (got, evaluated)
