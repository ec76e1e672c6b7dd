"""Online RL training speed: RL² vs a plain PPO of the same size (same run).

RL² (:class:`agentrl.online.TrialPPO`: trial wrapper, previous action /
reward / episode-flag inputs, GRU core replayed over whole env streams in
the update, new tasks drawn at trial ends) against a plain PPO written the
PureJaxRL way on the same environment: same number of environments, rollout
length, epochs, minibatches and optimizer, a feedforward network with the
same layer widths (the GRU cell replaced by one dense tanh layer of the
same width), plain observations, no trials. The ratio of their training env
steps per second is the overhead of the meta-RL machinery (target >= 0.5x).
Both are timed as one jitted PPO update (rollout + update), compile
excluded, best of 3; the env is Dark Room 9x9 (H=20, trials of 20
episodes for RL²) and the 5-arm Gaussian bandit (H=500). The breakdown
column is the share of the RL² update spent replaying the GRU through the
minibatches (backpropagation through time, sequential over the rollout).

    agentrl bench online_throughput [--envs 256] [--rollout 50] [--hidden 64]
"""

from __future__ import annotations

import argparse
import math

import jax
import jax.numpy as jnp
import optax

from agentrl.benchmarks import common as bench
from agentrl.cliargs import positive_int
from agentrl.envs import make as make_env
from agentrl.online.cores import ActionHead, _dense, _mlp, obs_features
from agentrl.online.ppo import PPOShape, TrialPPO, gae_across_episodes

HP = {
    "lr": 1e-3,
    "weight_decay": 0.0,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip_eps": 0.2,
    "ent_coef": 0.01,
    "vf_coef": 0.5,
    "reward_scale": 1.0,
}


def plain_ppo_update(env, num_envs, rollout, epochs, minibatches, hidden, embed):
    """``(init(key) -> state, update(state) -> state)`` of a plain PPO."""
    params = env.default_params
    obs_space = env.observation_space(params)
    head = ActionHead(env.action_space(params))
    dim = obs_features(obs_space, jnp.zeros(obs_space.shape, obs_space.dtype)).shape[0]
    tx = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(1e-3, eps=1e-5))
    root2 = math.sqrt(2.0)

    def net(w, x):
        e = jax.nn.relu(x @ w["embed"]["w"] + w["embed"]["b"])
        h = jnp.tanh(e @ w["core"]["w"] + w["core"]["b"])
        return _mlp(w["actor"], h), _mlp(w["critic"], h)[..., 0]

    def init(key):
        k = jax.random.split(key, 8)
        w = {
            "embed": _dense(k[0], dim, embed, root2),
            "core": _dense(k[1], embed, hidden, root2),
            "actor": [
                _dense(k[2], hidden, hidden, root2),
                _dense(k[3], hidden, head.out, 0.01),
            ],
            "critic": [
                _dense(k[4], hidden, hidden, root2),
                _dense(k[5], hidden, 1, 1.0),
            ],
        }
        task = jax.vmap(env.sample_params)(jax.random.split(k[6], num_envs))
        obs, state = jax.vmap(env.reset)(jax.random.split(k[7], num_envs), task)
        return w, tx.init(w), obs, state, task, key

    def update(carry):
        w, opt, obs, state, task, key = carry
        key, k_roll, k_perm = jax.random.split(key, 3)

        def step(c, k):
            obs, state = c
            k_a, k_s = jax.random.split(k)
            x = jax.vmap(lambda o: obs_features(obs_space, o))(obs)
            out, value = net(w, x)
            raw = head.sample(k_a, out, None)
            logp, _ = head.logp_entropy(out, None, raw)
            obs, state, reward, term, trunc, _ = jax.vmap(env.step)(
                jax.random.split(k_s, num_envs), state, head.to_env(raw), task
            )
            done = jnp.logical_or(term, trunc)
            rec = (x, raw, logp, value, jnp.asarray(reward, jnp.float32), done)
            return (obs, state), rec

        (obs, state), (x, raw, logp, value, reward, done) = jax.lax.scan(
            step, (obs, state), jax.random.split(k_roll, rollout)
        )
        x_last = jax.vmap(lambda o: obs_features(obs_space, o))(obs)
        _, next_value = net(w, x_last)
        adv = gae_across_episodes(value, next_value, reward, done, 0.99, 0.95)
        batch = (x, raw, logp, adv, adv + value)

        def loss(w, mb):
            x, raw, old, adv, target = mb
            out, v = net(w, x)
            lp, ent = head.logp_entropy(out, None, raw)
            ratio = jnp.exp(lp - old)
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            pg = -jnp.minimum(ratio * adv, jnp.clip(ratio, 0.8, 1.2) * adv).mean()
            return pg + 0.5 * jnp.square(v - target).mean() - 0.01 * ent.mean()

        per = num_envs // minibatches

        def sgd(c, idx):
            w, opt = c
            g = jax.grad(loss)(w, jax.tree.map(lambda a: a[:, idx], batch))
            u, opt = tx.update(g, opt, w)
            return (optax.apply_updates(w, u), opt), None

        perms = jax.vmap(lambda k: jax.random.permutation(k, num_envs))(
            jax.random.split(k_perm, epochs)
        ).reshape(epochs * minibatches, per)
        (w, opt), _ = jax.lax.scan(sgd, (w, opt), perms)
        return w, opt, obs, state, task, key

    return init, update


def measure(fn, state, steps: int) -> dict:
    import time

    start = time.perf_counter()
    compiled = jax.jit(fn).lower(state).compile()
    compile_s = time.perf_counter() - start
    state = jax.block_until_ready(compiled(state))  # warm
    seconds = bench.timeit(compiled, state, repeats=3)
    return {"steps_per_s": steps / seconds, "update_s": seconds, "compile_s": compile_s}


def replay_share(trainer, state, hp, update_s: float) -> float:
    """Share of an RL² update spent replaying the GRU (forward + backward of
    the minibatches' loss), the part plain PPO does without recurrence."""
    s = trainer.shape
    per = s.num_envs // s.num_minibatches
    n, d = per, trainer.core.dim
    batch = {
        "x": jnp.zeros((s.rollout_steps, n, d)),
        "raw": jnp.zeros((s.rollout_steps, n), jnp.int32),
        "logp": jnp.zeros((s.rollout_steps, n)),
        "reset": jnp.zeros((s.rollout_steps, n), bool),
        "adv": jnp.ones((s.rollout_steps, n)),
        "target": jnp.zeros((s.rollout_steps, n)),
    }
    if not trainer.head.discrete:
        return float("nan")
    grad = jax.jit(jax.grad(lambda w: trainer._loss(w, batch, state.hidden[:n], hp)[0]))
    jax.block_until_ready(grad(state.weights))
    one = bench.timeit(grad, state.weights, repeats=5)
    return one * s.num_epochs * s.num_minibatches / update_s


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="agentrl bench online_throughput", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--envs", type=positive_int, default=256)
    parser.add_argument("--rollout", type=positive_int, default=50)
    parser.add_argument("--hidden", type=positive_int, default=64)
    parser.add_argument("--embed", type=positive_int, default=64)
    args = parser.parse_args(argv)
    hp = {k: jnp.float32(v) for k, v in HP.items()}
    subjects = [
        ("darkroom 9x9 H=20", make_env("darkroom", size=9, horizon=20), 20),
        (
            "gaussian bandit 5 arms H=500",
            make_env("gaussian_bandit", num_arms=5, horizon=500, noise_variance=0.09),
            1,
        ),
    ]
    steps = args.envs * args.rollout
    results, rows, targets = {}, [], []
    for name, env, episodes in subjects:
        shape = PPOShape(
            num_envs=args.envs,
            trial_episodes=episodes,
            rollout_steps=args.rollout,
            num_epochs=4,
            num_minibatches=4,
            num_updates=1,
            hidden=args.hidden,
            embed=args.embed,
            grad_clip=0.5,
        )
        trainer = TrialPPO(env, shape, env.sample_params)
        state = jax.jit(trainer.init)(jax.random.key(0), hp)
        rl2 = measure(lambda s: trainer.update(s, hp)[0], state, steps)
        rl2["replay_share"] = replay_share(trainer, state, hp, rl2["update_s"])
        init, update = plain_ppo_update(
            env, args.envs, args.rollout, 4, 4, args.hidden, args.embed
        )
        plain = measure(update, jax.jit(init)(jax.random.key(0)), steps)
        ratio = rl2["steps_per_s"] / plain["steps_per_s"]
        results[name] = {"recurrent_trial_ppo": rl2, "plain_ppo": plain, "ratio": ratio}
        rows.append(
            {
                "env": name,
                "RL² steps/s": rl2["steps_per_s"],
                "plain PPO steps/s": plain["steps_per_s"],
                "RL² / plain": ratio,
                "RL² update share in GRU replay": rl2["replay_share"],
            }
        )
        targets.append(bench.target(f"RL² / plain PPO env steps/s, {name}", ratio, 0.5))
        print(rows[-1], flush=True)
    notes = (
        f"{args.envs} envs x {args.rollout}-step rollouts, 4 epochs x 4 minibatches, "
        f"embed {args.embed}, core width {args.hidden} (GRU for RL², one dense "
        "tanh layer for plain PPO); one jitted update (rollout + PPO update), "
        "compile excluded, best of 3. 'GRU replay' is the share of the RL² "
        "update spent in the minibatches' forward+backward through the GRU "
        "(sequential over the rollout's steps): the cost of recurrence that "
        "a feedforward PPO does not pay."
    )
    path = bench.write_results("online_throughput", results, targets, rows, notes)
    print(bench.markdown_table(rows))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
