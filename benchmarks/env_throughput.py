"""Random-policy environment throughput: agentrl families vs gymnax.

For every registered family and for gymnax's ``BernoulliBandit-misc`` and
``CartPole-v1`` (plus the gymnax env each contextual family wraps), runs a
random policy on N parallel envs (N = 1, 1,024, 16,384) inside one jitted
``lax.scan`` and reports steps per second, compile time separately. Target:
every agentrl family at least as fast as gymnax's BernoulliBandit at 16,384
envs (ratio >= 1.0 in the same run).

    agentrl bench env_throughput [--quick]
"""

from __future__ import annotations

import argparse
import time

import common as bench
import jax
import jax.numpy as jnp

from agentrl import envs

SIZES = (1, 1024, 16384)
STEPS = {1: 2000, 1024: 200, 16384: 50}
# gymnax env each contextual family wraps, to compare like with like.
GYMNAX_REFERENCE = {
    "cartpole_contextual": "CartPole-v1",
    "pendulum_contextual": "Pendulum-v1",
    "mountaincar_contextual": "MountainCar-v0",
    "acrobot_contextual": "Acrobot-v1",
}


def make_runner(env, params, num_envs: int, num_steps: int, batched_params: bool):
    """Jitted function(key) running ``num_envs`` random-policy envs."""

    def run(key):
        keys = jax.random.split(key, num_envs)
        p_axis = 0 if batched_params else None
        obs, state = jax.vmap(env.reset, (0, p_axis))(keys, params)

        def body(carry, k):
            state, total = carry
            k_act, k_step = jax.random.split(k)
            acts = jax.vmap(env.action_space(None).sample)(
                jax.random.split(k_act, num_envs)
            )
            obs, state, reward, *_ = jax.vmap(env.step, (0, 0, 0, p_axis))(
                jax.random.split(k_step, num_envs), state, acts, params
            )
            # Consume the observations too, or XLA drops the dynamics of envs
            # whose reward does not depend on the state (MountainCar: -1).
            seen = sum(jnp.sum(x.astype(jnp.float32)) for x in jax.tree.leaves(obs))
            return (state, total + reward.sum() + 1e-9 * seen), None

        (_, total), _ = jax.lax.scan(
            body, (state, jnp.float32(0)), jax.random.split(key, num_steps)
        )
        return total

    return jax.jit(run)


def measure(env, params, num_envs, batched_params):
    num_steps = STEPS[num_envs]
    fn = make_runner(env, params, num_envs, num_steps, batched_params)
    key = jax.random.key(0)
    start = time.perf_counter()
    jax.block_until_ready(fn(key))
    compile_s = time.perf_counter() - start
    run_s = bench.timeit(fn, key, repeats=3)
    return {"steps_per_s": num_envs * num_steps / run_s, "compile_s": compile_s}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="agentrl bench env_throughput", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="only 16,384 envs")
    args = parser.parse_args(argv)
    sizes = (16384,) if args.quick else SIZES
    import gymnax

    subjects = []
    for name in envs.registered():
        try:
            env = envs.make(name)
        except ImportError as e:
            print(f"skip {name}: {e}")
            continue
        subjects.append((name, "agentrl", env, None))
    refs = {"BernoulliBandit-misc", "CartPole-v1", *GYMNAX_REFERENCE.values()}
    for ref in sorted(refs):
        env, params = gymnax.make(ref)
        subjects.append((ref, "gymnax", env, params))

    rows, results = [], {}
    for name, lib, env, params in subjects:
        for n in sizes:
            if lib == "agentrl":
                p = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(1), n))
                r = measure(env, p, n, batched_params=True)
            else:
                r = measure(env, params, n, batched_params=False)
            results.setdefault(name, {})[str(n)] = {**r, "library": lib}
            print(
                f"{lib:8s} {name:28s} n={n:6d} {r['steps_per_s']:.3e} steps/s "
                f"(compile {r['compile_s']:.2f}s)",
                flush=True,
            )

    top = str(max(sizes))
    ref = results["BernoulliBandit-misc"][top]["steps_per_s"]
    targets = []
    for name, lib, *_ in subjects:
        sps = {n: results[name][n]["steps_per_s"] for n in results[name]}
        row = {"env": name, "library": lib}
        row.update({f"steps/s @{n}": v for n, v in sps.items()})
        row["ratio vs BernoulliBandit-misc"] = sps[top] / ref
        if name in GYMNAX_REFERENCE:
            row["ratio vs own gymnax"] = (
                sps[top] / results[GYMNAX_REFERENCE[name]][top]["steps_per_s"]
            )
        rows.append(row)
        if lib == "agentrl":
            targets.append(
                bench.target(
                    f"{name} / gymnax BernoulliBandit-misc @{top} envs",
                    sps[top] / ref,
                    1.0,
                )
            )
    path = bench.write_record(
        "env_throughput",
        results,
        targets,
        rows,
        notes="Random policy, one jitted lax.scan; compile time excluded "
        "(listed in the JSON).",
    )
    print(bench.markdown_table(rows))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
