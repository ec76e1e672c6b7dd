"""DPT's training contexts keep terminated steps (the XLand DPT baseline's rule).

On a family whose episodes end at the goal (Dark Room hard) the goal's
reward comes only on the terminated step: a context that skipped those
steps never showed a reward. A terminated step's successor is the next
stored observation (the next episode's first); steps only truncated and a
history's last step stay out, so data without terminated steps draw
exactly as before. Host and device samplers draw the same contexts, at
the frequencies of an enumeration written here apart from the samplers.
"""

import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_device_sampler import DRAWS, P_MIN, _fit_p

from agentrl import envs
from agentrl.data import DPTSampler, open_dataset, samplers, write_dataset
from agentrl.data import device_sampler as ds_mod
from agentrl.data.device_sampler import (
    DeviceSampler,
    batch_key,
    draw_index,
    index_tables,
    spec_of,
    valid_tables,
)
from agentrl.sources import source_histories

HARD = envs.make("darkroom_hard", size=3, horizon=6)  # the goal terminates
PLAIN = envs.make("darkroom", size=3, horizon=6)  # truncated only


def _write(tmp_path_factory, env, name):
    out = tmp_path_factory.mktemp("t") / name
    source = source_histories("q_learning", env)
    write_dataset(out, env, source, 14, 6, 0, chunk_size=14)
    return open_dataset(out)


@pytest.fixture(scope="module")
def hard(tmp_path_factory):
    return _write(tmp_path_factory, HARD, "hard")


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    return _write(tmp_path_factory, PLAIN, "plain")


def _old_valid_tables(done, context_size, terminated=None):
    """The rule before terminated steps were kept (frozen copy): every
    episode-final step out, and the record's last."""
    done = np.array(done, bool)
    done[:, -1] = True
    num_valid = (~done).sum(1).astype(np.int32)
    if num_valid.min(initial=context_size) < context_size:
        raise ValueError("too few")
    order = np.argsort(done, axis=1, kind="stable").astype(np.int32)
    return {"valid": order, "num_valid": num_valid}


def _device_batches(device, steps):
    draw = jax.jit(jax.vmap(lambda s: device.draw(device.data, s)))
    return jax.device_get(draw(jnp.arange(steps)))


def test_contexts_show_the_goal_reward_of_terminated_steps(hard):
    host = DPTSampler(hard, 16, 4, seed=0)
    data = host.decoded()
    assert ((data["reward"] > 0) <= data["terminated"]).all()  # only there
    assert data["terminated"][:, :-1].any()
    host_rewards = np.stack([host.batch(s)["context_reward"] for s in range(40)])
    device_rewards = _device_batches(DeviceSampler(host), 40)["context_reward"]
    assert (host_rewards > 0).any() and (device_rewards > 0).any()


def _reference(sampler) -> dict:
    """``{(row, context steps): probability}``: a uniform record, then a
    uniform run of ``context_size`` consecutive steps among those that are
    not only truncated and not the record's last."""
    data = sampler.decoded()
    n, steps = sampler.context_size, sampler.num_steps
    out = {}
    for r in range(sampler.num_records):
        cut = data["truncated"][r] & ~data["terminated"][r]
        keep = np.flatnonzero(~cut & (np.arange(steps) < steps - 1))
        starts = len(keep) - n + 1
        for f in range(starts):
            key = (r, tuple(keep[f : f + n].tolist()))
            out[key] = 1 / (sampler.num_records * starts)
    return out


def _host_contexts(host, monkeypatch, draws):
    """``(row, context steps)`` of host batches: observations replaced by
    ``row * S + step`` to read both off ``context_obs``."""
    fetch, steps = host._fetch, host.num_steps

    def numbered(rows, *args):
        data = dict(fetch(rows, *args))
        data["obs"] = (rows[:, None] * steps + np.arange(steps)).astype(np.int32)
        return data

    monkeypatch.setattr(host, "_fetch", numbered)
    obs = np.concatenate([host.host_batch(s)["context_obs"] for s in range(draws)])
    return [(int(o[0] // steps), tuple((o % steps).tolist())) for o in obs]


@pytest.mark.long
def test_host_and_device_contexts_follow_the_reference(hard, monkeypatch):
    host = DPTSampler(hard, 8, 4, seed=2)
    reference = _reference(host)
    assert abs(sum(reference.values()) - 1) < 1e-9
    device = DeviceSampler(host)
    fn = jax.jit(
        jax.vmap(lambda s: draw_index(device.spec, device.data, batch_key(2, s)))
    )
    index = jax.device_get(fn(jnp.arange(DRAWS)))
    rows, idx = index["rows"].reshape(-1), index["idx"].reshape(-1, 4)
    drawn = [(int(r), tuple(i.tolist())) for r, i in zip(rows, idx, strict=True)]
    terminated = host.decoded()["terminated"]
    assert terminated[rows[:, None], idx].any()  # terminated steps are drawn
    for keys in (drawn, _host_contexts(host, monkeypatch, DRAWS // 2)):
        assert set(keys) <= set(reference)
        assert _fit_p(keys, reference) > P_MIN


def test_a_terminated_steps_successor_is_the_next_stored_observation(hard):
    host = DPTSampler(hard, 16, 4, seed=3)
    device = DeviceSampler(host)
    data = host.decoded()
    seen = collections.Counter()
    for step in range(6):
        i, batch = device.index(step), device.batch(step)
        r, idx = i["rows"][:, None], i["idx"]
        np.testing.assert_array_equal(
            batch["context_next_obs"], data["obs"][r, idx + 1]
        )
        np.testing.assert_array_equal(batch["context_reward"], data["reward"][r, idx])
        seen.update(data["terminated"][r, idx].ravel().tolist())
    assert seen[True] > 0  # and so the true final observation is not shown


def test_data_without_terminated_steps_draw_as_before(plain, monkeypatch):
    rng = np.random.default_rng(0)
    for _ in range(20):
        done = rng.random((6, 30)) < 0.2
        for terminated in (None, np.zeros_like(done)):
            new, old = valid_tables(done, 3, terminated), _old_valid_tables(done, 3)
            for key in old:
                np.testing.assert_array_equal(new[key], old[key])
    host = DPTSampler(plain, 8, 5, seed=1)
    assert not host.decoded()["terminated"].any() and host.decoded()["truncated"].any()
    new_batches = [host.batch(s) for s in range(5)]
    new_device = DeviceSampler(host)
    monkeypatch.setattr(samplers, "valid_tables", _old_valid_tables)
    monkeypatch.setattr(ds_mod, "valid_tables", _old_valid_tables)
    old_device = DeviceSampler(host)
    for s, batch in enumerate(new_batches):
        for name, value in host.batch(s).items():
            np.testing.assert_array_equal(batch[name], value, err_msg=name)
        for name, value in old_device.index(s).items():
            np.testing.assert_array_equal(new_device.index(s)[name], value)


def test_dpt_tables_need_terminated(hard):
    host = DPTSampler(hard, 8, 4)
    with pytest.raises(ValueError, match="need `terminated`"):
        index_tables(spec_of(host), host.done_flags(), host.task_ids)


def test_streamed_batches_draw_the_device_paths_contexts(hard):
    """A split read from disk per batch (too large to cache) draws what the
    device path draws, terminated steps included."""
    from agentrl.train import parallel
    from agentrl.train.batches import StreamedBatches

    host = DPTSampler(hard, 16, 4, seed=0, cache_bytes=0)
    assert not host.cached
    streamed = StreamedBatches(host, parallel.make_mesh())
    device = _device_batches(DeviceSampler(DPTSampler(hard, 16, 4, seed=0)), 6)
    for step in range(6):
        batch = streamed.host_batch(step)
        for field in ("context_obs", "context_reward", "context_next_obs", "label"):
            np.testing.assert_array_equal(batch[field], device[field][step])


def test_evaluation_contexts_read_a_terminated_steps_successor_as_training_does():
    from agentrl.agents.agent import Step
    from agentrl.agents.context_set import Context, append, successor

    # three rows: terminated, only truncated, neither; obs [B, 2]
    final = jnp.array([[1, 1], [2, 2], [3, 3]], jnp.int32)
    reset = jnp.array([[7, 7], [8, 8], [9, 9]], jnp.int32)
    step = Step(
        obs=jnp.zeros((3, 2), jnp.int32),
        action=jnp.zeros((3,), jnp.int32),
        reward=jnp.ones((3,)),
        next_obs=final,
        terminated=jnp.array([True, False, False]),
        truncated=jnp.array([False, True, False]),
        reset_obs=reset,
    )
    expected = np.array([[7, 7], [2, 2], [3, 3]])
    np.testing.assert_array_equal(successor(step), expected)
    empty = Context(
        obs=jnp.zeros((3, 4, 2), jnp.int32),
        action=jnp.zeros((3, 4), jnp.int32),
        reward=jnp.zeros((3, 4)),
        next_obs=jnp.zeros((3, 4, 2), jnp.int32),
        count=jnp.zeros((3,), jnp.int32),
    )
    np.testing.assert_array_equal(append(empty, step).next_obs[:, 0], expected)
