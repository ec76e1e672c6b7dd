"""Random-policy environment throughput: agentrl families vs gymnax.

For every registered family and for gymnax's ``BernoulliBandit-misc`` and
``CartPole-v1`` (plus the gymnax env each contextual family wraps), runs a
random policy on N parallel envs (N = 1, 1,024, 16,384) inside one jitted
``lax.scan`` and reports steps per second, compile time separately. Target:
every agentrl family at least as fast as gymnax's BernoulliBandit at 16,384
envs. At that size each env is timed against BernoulliBandit (and a
contextual family also against the gymnax env it wraps) in ``--rounds``
paired rounds (:func:`pair_with_references`, the order reversed each
round), so both sides of a ratio run under the same load: the ratio is the
median of the per-round ratios with a bootstrap 95% CI, and a target is met
only when the whole CI is above 1.0 (``with_ci``).

The MuJoCo families (extra ``mujoco``) are measured apart, with
``--mujoco``: each against Brax's own env step on the same system
(``brax.envs.get_environment(..., backend="mjx")``, reset and step vmapped
over ``--mujoco-envs`` envs in one jitted ``lax.scan``, no auto-reset), the
same uniform random actions in both; per-round time ratios (paired rounds,
the order alternating) give a median and a bootstrap CI. Target: every
family >= 0.9x Brax's steps/s, met only when the whole CI is above 0.9; each
side's steps/s are read from the round whose ratio is the median. Our side
carries what Brax's bare step does not: the branch-free auto-reset, a key
per env and step, and (``*_params``) a ``sys`` batched over tasks. So each
family is also timed, in the same paired rounds, against Brax's training env
with those features (:func:`brax_wrapped_runner`:
``brax.envs.training.wrap``, its auto-reset and episode length, and for
``*_params`` our tasks' physics through its domain-randomisation wrapper):
that ratio is reported, with no target. Brax's auto-reset returns to the
episode's *first* state (cached), ours draws a fresh start each episode as
the references' gym envs do. A ``*_params`` family is also timed against
Brax's bare step on the same task physics drawn inside the jitted call
(:func:`brax_task_runner`, Brax's domain-randomisation wrapper on traced
physics): Brax's step with physics as data, so that ratio is the cost of
what the family adds (reported, no target); and Brax's bare step is timed on
its *default* physics passed as data (``brax_task_runner(...,
default=True)``) against itself on constant physics: what physics as data
costs MJX, which no family whose task is its physics can avoid
(reported). Written to ``env_throughput_mujoco``.

    agentrl bench env_throughput [--quick] [--rounds 5]
    agentrl bench env_throughput --mujoco [--mujoco-envs 16] [--mujoco-steps 40]
    agentrl bench env_throughput --mujoco --mujoco-families hopper_params

``--mujoco-families`` measures a subset (each family compiles for minutes
on 2 cores) into ``env_throughput_mujoco_<families>``, beside the record of
all five.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import common as bench
import jax
import jax.numpy as jnp

from agentrl import envs
from agentrl.envs.registry import MUJOCO_FAMILIES
from agentrl.evaluate.targets import with_ci

SIZES = (1, 1024, 16384)
#: every family's target reference, at the largest size
REFERENCE = "BernoulliBandit-misc"
STEPS = {1: 2000, 1024: 200, 16384: 50}
# gymnax env each contextual family wraps, to compare like with like.
GYMNAX_REFERENCE = {
    "cartpole_contextual": "CartPole-v1",
    "pendulum_contextual": "Pendulum-v1",
    "mountaincar_contextual": "MountainCar-v0",
    "acrobot_contextual": "Acrobot-v1",
}


def _run_keys(key):
    """``(tasks, reset, steps)``: the keys of one timed call, split alike by
    every runner (so the same starts and actions, and no key used twice)."""
    return jax.random.split(key, 3)


def make_runner(env, params, num_envs: int, num_steps: int, batched_params: bool):
    """Jitted function(key) running ``num_envs`` random-policy envs."""

    def run(key):
        _, k_reset, k_steps = _run_keys(key)
        keys = jax.random.split(k_reset, num_envs)
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
            body, (state, jnp.float32(0)), jax.random.split(k_steps, num_steps)
        )
        return total

    return jax.jit(run)


def measure(env, params, num_envs, batched_params):
    """Steps/s (best of 3 calls) and compile seconds of one env at one size
    (the sizes below the largest, which have no paired reference)."""
    num_steps = STEPS[num_envs]
    fn = make_runner(env, params, num_envs, num_steps, batched_params)
    key = jax.random.key(0)
    compile_s = _compile_seconds(fn, key)
    run_s = bench.timeit(fn, key, repeats=3)
    return {"steps_per_s": num_envs * num_steps / run_s, "compile_s": compile_s}


def median_round(ratios) -> int:
    """The round whose ratio is the median of ``ratios`` (with an even count,
    the first of the two nearest it): the round to read both sides'
    steps/s from, so they agree with the median ratio beside them."""
    median = statistics.median(ratios)
    return min(range(len(ratios)), key=lambda r: abs(ratios[r] - median))


def pair_with_references(runners: dict, rounds: int) -> dict:
    """Each env of ``runners`` (``{name: jitted fn(key)}``, all at one size)
    timed against :data:`REFERENCE` (and a contextual family also against
    the gymnax env it wraps) in ``rounds`` paired rounds
    (:func:`common.paired_rounds`: the order reverses each round).

    Returns ``{name: {other: {"seconds": {...}, "median", "ci95",
    "per_round"}}}``, the ratio being ``other``'s seconds over ``name``'s in
    the same round (``name``'s steps/s over ``other``'s); each pairing its
    own key (the same in both sides of a round, no key used twice).
    """
    out = {}
    for i, name in enumerate(runners):
        if name == REFERENCE:
            continue
        others = [
            REFERENCE,
            *([GYMNAX_REFERENCE[name]] if name in GYMNAX_REFERENCE else []),
        ]
        key = jax.random.fold_in(jax.random.key(2), i)
        fns = {n: (runners[n], (key,)) for n in (name, *others)}
        seconds = bench.paired_rounds(fns, rounds)
        out[name] = {}
        for other in others:
            per_round = [
                b / a for a, b in zip(seconds[name], seconds[other], strict=True)
            ]
            median, low, high = bench.median_ci(per_round)
            out[name][other] = {
                "seconds": {name: seconds[name], other: seconds[other]},
                "per_round": per_round,
                "median": median,
                "ci95": [low, high],
            }
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="agentrl bench env_throughput", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="only 16,384 envs")
    parser.add_argument(
        "--rounds",
        type=_positive,
        default=5,
        metavar="N",
        help="paired rounds of each env with the reference at 16,384 envs",
    )
    parser.add_argument(
        "--mujoco",
        action="store_true",
        help="only the MuJoCo families, each against Brax's own step",
    )
    parser.add_argument("--mujoco-envs", type=_positive, default=16, metavar="N")
    parser.add_argument("--mujoco-steps", type=_positive, default=40, metavar="N")
    parser.add_argument("--mujoco-rounds", type=_positive, default=5, metavar="N")
    parser.add_argument(
        "--mujoco-families",
        type=_families,
        default=MUJOCO_FAMILIES,
        metavar="A,B",
        help="with --mujoco: only these families (default: all five)",
    )
    args = parser.parse_args(argv)
    if args.mujoco:
        sizes = (args.mujoco_envs, args.mujoco_steps, args.mujoco_rounds)
        mujoco_main(*sizes, args.mujoco_families)
        return
    sizes = (16384,) if args.quick else SIZES
    import gymnax

    load_start = os.getloadavg()[0]
    subjects = []
    for name in envs.registered():
        if name in MUJOCO_FAMILIES:
            print(f"skip {name}: --mujoco measures it against Brax's own step")
            continue
        try:
            env = envs.make(name)
        except ImportError as e:
            print(f"skip {name}: {e}")
            continue
        subjects.append((name, "agentrl", env, None))
    refs = {REFERENCE, "CartPole-v1", *GYMNAX_REFERENCE.values()}
    for ref in sorted(refs):
        env, params = gymnax.make(ref)
        subjects.append((ref, "gymnax", env, params))

    top = max(sizes)
    key = jax.random.key(0)
    results, runners = {}, {}
    for name, lib, env, params in subjects:
        for n in sizes:
            if lib == "agentrl":
                p = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(1), n))
            else:
                p = params
            if n == top:  # compiled now, timed below in rounds with the reference
                runners[name] = make_runner(env, p, n, STEPS[n], lib == "agentrl")
                r = {"compile_s": _compile_seconds(runners[name], key)}
            else:
                r = measure(env, p, n, batched_params=lib == "agentrl")
            results.setdefault(name, {})[str(n)] = {**r, "library": lib}
            print(
                f"{lib:8s} {name:28s} n={n:6d} "
                + (f"{r['steps_per_s']:.3e} steps/s " if "steps_per_s" in r else "")
                + f"(compile {r['compile_s']:.2f}s)",
                flush=True,
            )

    paired = pair_with_references(runners, args.rounds)
    steps = top * STEPS[top]
    reference_seconds = [
        sec for vs in paired.values() for sec in vs[REFERENCE]["seconds"][REFERENCE]
    ]
    results[REFERENCE][str(top)]["steps_per_s"] = steps / statistics.median(
        reference_seconds
    )
    for name, vs in paired.items():
        mid = median_round(vs[REFERENCE]["per_round"])
        entry = results[name][str(top)]
        entry["steps_per_s"] = steps / vs[REFERENCE]["seconds"][name][mid]
        entry["paired"] = vs

    rows, targets = [], []
    for name, lib, *_ in subjects:
        sps = {n: results[name][n]["steps_per_s"] for n in results[name]}
        row = {"env": name, "library": lib}
        row.update({f"steps/s @{n}": v for n, v in sps.items()})
        if name == REFERENCE:
            row[f"ratio vs {REFERENCE} (median [CI])"] = "1 (itself)"
        else:
            vs = paired[name][REFERENCE]
            row[f"ratio vs {REFERENCE} (median [CI])"] = _median_ci_text(vs)
        if name in GYMNAX_REFERENCE:
            own = paired[name][GYMNAX_REFERENCE[name]]
            row["ratio vs own gymnax (median [CI])"] = _median_ci_text(own)
        rows.append(row)
        if lib == "agentrl":
            vs = paired[name][REFERENCE]
            targets.append(
                with_ci(
                    f"{name} / gymnax {REFERENCE} @{top} envs",
                    vs["median"],
                    *vs["ci95"],
                    1.0,
                )
            )
    path = bench.write_record(
        "env_throughput",
        results,
        targets,
        rows,
        notes=(
            "Random policy, one jitted lax.scan; compile time excluded "
            f"(listed in the JSON). At {top} envs each env is timed against "
            f"gymnax {REFERENCE} (and a contextual family also against the "
            f"gymnax env it wraps) in {args.rounds} paired rounds, the order "
            "reversed each round; ratio = the reference's seconds over the "
            "env's in the same round, median over rounds [bootstrap 95% CI]; "
            "a target is met only when its whole CI is above 1. Steps/s "
            f"@{top}: the env's from the round whose "
            f"ratio to {REFERENCE} is the median; {REFERENCE}'s the median of "
            "all its rounds. Smaller sizes: best of 3 calls, no reference. "
            f"{bench.load_note(load_start)}."
        ),
    )
    print(bench.markdown_table(rows))
    print(f"wrote {path}")


def _median_ci_text(vs: dict) -> str:
    return "{:.3f} [{:.3f}, {:.3f}]".format(vs["median"], *vs["ci95"])


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text}")
    return value


def _families(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in MUJOCO_FAMILIES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown MuJoCo families {unknown or text!r}; allowed: "
            f"{', '.join(MUJOCO_FAMILIES)}"
        )
    return names


def mujoco_runners(env, num_envs: int, num_steps: int):
    """Jitted ``(ours, brax)``: ``num_envs`` envs, ``num_steps`` random steps.

    Both draw the same uniform actions from the same keys; ours steps
    ``env`` with a task per env (``sample_params``), Brax's steps
    ``env.brax_env`` (its default system) without auto-reset.
    """
    brax_env, size = env.brax_env, env.action_size

    def actions(k):
        return jax.random.uniform(k, (num_envs, size), minval=-1.0, maxval=1.0)

    def consume(obs, reward):  # keep XLA from dropping any of the dynamics
        return reward.sum() + 1e-9 * obs.sum()

    def ours(key):
        k_tasks, k_reset, k_steps = _run_keys(key)
        params = jax.vmap(env.sample_params)(jax.random.split(k_tasks, num_envs))
        _, state = jax.vmap(env.reset)(jax.random.split(k_reset, num_envs), params)

        def body(carry, k):
            state, total = carry
            k_act, k_step = jax.random.split(k)
            step_keys = jax.random.split(k_step, num_envs)
            obs, state, reward, *_ = jax.vmap(env.step)(
                step_keys, state, actions(k_act), params
            )
            return (state, total + consume(obs, reward)), None

        steps = jax.random.split(k_steps, num_steps)
        return jax.lax.scan(body, (state, jnp.float32(0)), steps)[0][1]

    def brax(key):
        _, k_reset, k_steps = _run_keys(key)
        state = jax.vmap(brax_env.reset)(jax.random.split(k_reset, num_envs))
        step = jax.vmap(brax_env.step)
        return _random_play(step, state, k_steps, num_steps, size)

    return jax.jit(ours), jax.jit(brax)


def physics_of(env, params) -> tuple:
    """``(sys, in_axes)`` for Brax's ``DomainRandomizationVmapWrapper``: the
    physics of a ``*_params`` family's tasks ``params`` (batched), batched
    over its randomised fields only."""
    sys_v = env.sys.replace(**{f: getattr(params, f) for f in env.randomise})
    in_axes = jax.tree.map(lambda _: None, env.sys)
    return sys_v, in_axes.replace(**{f: 0 for f in env.randomise})


def task_physics(env, num_envs: int) -> tuple:
    """:func:`physics_of` ``num_envs`` of the family's tasks, drawn once
    (concrete)."""
    keys = jax.random.split(jax.random.key(1), num_envs)
    return physics_of(env, jax.vmap(env.sample_params)(keys))


def _random_play(step, state, key, num_steps: int, size: int):
    """Summed reward (plus a trace of the observations, so XLA keeps the
    dynamics) of ``num_steps`` uniform random actions through a batched
    Brax ``step(state, action) -> state``."""
    num_envs = state.reward.shape[0]

    def body(carry, k):
        state, total = carry
        k_act, _ = jax.random.split(k)
        action = jax.random.uniform(k_act, (num_envs, size), minval=-1, maxval=1)
        state = step(state, action)
        return (state, total + state.reward.sum() + 1e-9 * state.obs.sum()), None

    steps = jax.random.split(key, num_steps)
    return jax.lax.scan(body, (state, jnp.float32(0)), steps)[0][1]


def brax_wrapped_runner(env, num_envs: int, num_steps: int):
    """Jitted Brax training env (``brax.envs.training.wrap``) of ``env``'s
    system: ``num_envs`` envs, ``num_steps`` random steps, episodes of
    ``env.horizon`` with Brax's auto-reset; a ``*_params`` family's envs run
    the physics of ``num_envs`` of our tasks (a ``sys`` batched over its
    randomised fields only, as ``DomainRandomizationVmapWrapper`` takes it)."""
    from brax.envs.wrappers import training

    randomization = None
    if getattr(env, "randomise", None):
        physics = task_physics(env, num_envs)
        randomization = lambda sys: physics  # noqa: E731
    wrapped = training.wrap(
        env.brax_env, episode_length=env.horizon, randomization_fn=randomization
    )
    size = env.action_size

    def run(key):
        # raw uint32 keys [N, 2]: Brax's episode wrapper reads rng.shape[:-1]
        _, k_reset, k_steps = _run_keys(key)
        state = wrapped.reset(jax.random.key_data(jax.random.split(k_reset, num_envs)))
        return _random_play(wrapped.step, state, k_steps, num_steps, size)

    return jax.jit(run)


def brax_task_runner(env, num_envs: int, num_steps: int, default: bool = False):
    """Jitted Brax bare step on a ``*_params`` family's task physics drawn
    inside the call, as ours are (traced, through Brax's own
    ``DomainRandomizationVmapWrapper``), no auto-reset: the same physics as
    data, so ours over it is the cost of what the family adds (auto-reset,
    keys). ``default``: every env gets the default physics instead, still
    as data (arguments of the jitted call, batched per env): Brax's step
    over its constant-physics self is then what physics as data costs MJX."""
    from brax.envs.wrappers import training

    size = env.action_size

    def run(key, defaults):
        k_tasks, k_reset, k_steps = _run_keys(key)
        params = jax.vmap(env.sample_params)(jax.random.split(k_tasks, num_envs))
        if default:
            params = params.replace(**defaults)
        physics = physics_of(env, params)
        on_tasks = training.DomainRandomizationVmapWrapper(
            env.brax_env, lambda sys: physics
        )
        state = on_tasks.reset(jax.random.split(k_reset, num_envs))

        return _random_play(on_tasks.step, state, k_steps, num_steps, size)

    jitted = jax.jit(run)
    defaults = {
        f: jnp.broadcast_to(env.defaults[f], (num_envs, *env.defaults[f].shape))
        for f in env.randomise
    }
    return lambda key: jitted(key, defaults)


def _compile_seconds(fn, key) -> float:
    start = time.perf_counter()
    jax.block_until_ready(fn(key))
    return time.perf_counter() - start


def mujoco_main(
    num_envs: int,
    num_steps: int,
    rounds: int,
    families: tuple[str, ...] = MUJOCO_FAMILIES,
) -> None:
    """Each MuJoCo family of ``families`` against Brax's own step (module doc)."""
    load_start = os.getloadavg()[0]
    key = jax.random.key(0)
    results, rows, targets = {}, [], []
    for name in families:
        env = envs.make(name)  # an ImportError names the extra
        ours, brax = mujoco_runners(env, num_envs, num_steps)
        wrapped = brax_wrapped_runner(env, num_envs, num_steps)
        runners = {"agentrl": ours, "brax": brax, "brax_wrapped": wrapped}
        if getattr(env, "randomise", None):
            runners["brax_task"] = brax_task_runner(env, num_envs, num_steps)
            runners["brax_data"] = brax_task_runner(
                env, num_envs, num_steps, default=True
            )
        compile_s = {lib: _compile_seconds(fn, key) for lib, fn in runners.items()}
        seconds = bench.paired_rounds(
            {lib: (fn, (key,)) for lib, fn in runners.items()}, rounds
        )

        def per_round(other, to="agentrl"):  # other's seconds / to's, per round
            return [b / a for a, b in zip(seconds[to], seconds[other], strict=True)]

        def ratio(other, to="agentrl"):  # their median [CI]
            return bench.median_ci(per_round(other, to))

        median, low, high = ratio("brax")
        parity = ratio("brax_wrapped")
        same = ratio("brax_task") if "brax_task" in runners else None
        data = ratio("brax", to="brax_data") if "brax_data" in runners else None
        steps = num_envs * num_steps
        mid = median_round(per_round("brax"))
        sps = {lib: steps / sec[mid] for lib, sec in seconds.items()}
        results[name] = {
            "num_envs": num_envs,
            "num_steps": num_steps,
            "seconds_per_round": seconds,
            "compile_s": compile_s,
            "median_round": mid,
            "steps_per_s_median_round": sps,
            "ratio_median": median,
            "ratio_ci95": [low, high],
            "wrapped_ratio_median": parity[0],
            "wrapped_ratio_ci95": list(parity[1:]),
            "task_physics_ratio_median": same and same[0],
            "task_physics_ratio_ci95": same and list(same[1:]),
            "brax_physics_as_data_ratio_median": data and data[0],
            "brax_physics_as_data_ratio_ci95": data and list(data[1:]),
        }
        rows.append(
            {
                "family": name,
                "brax env": env.brax_name,
                "agentrl steps/s (median round)": sps["agentrl"],
                "brax steps/s (median round)": sps["brax"],
                "ratio (median)": median,
                "95% CI": f"[{low:.3f}, {high:.3f}]",
                "vs Brax training env (median [CI])": (
                    f"{parity[0]:.3f} [{parity[1]:.3f}, {parity[2]:.3f}]"
                ),
                "vs Brax step on the same traced task physics": (
                    f"{same[0]:.3f} [{same[1]:.3f}, {same[2]:.3f}]" if same else "–"
                ),
                "Brax step, default physics as data vs constant": (
                    f"{data[0]:.3f} [{data[1]:.3f}, {data[2]:.3f}]" if data else "–"
                ),
                "compile s (agentrl / brax / wrapped[ / task / data])": " / ".join(
                    f"{compile_s[lib]:.1f}" for lib in runners
                ),
            }
        )
        targets.append(
            with_ci(f"{name} / Brax {env.brax_name} step", median, low, high, 0.9)
        )
        print(
            f"{name:16s} {sps['agentrl']:.3e} vs brax {sps['brax']:.3e} steps/s: "
            f"x{median:.3f} [{low:.3f}, {high:.3f}]; vs Brax's training env "
            f"x{parity[0]:.3f} [{parity[1]:.3f}, {parity[2]:.3f}]",
            flush=True,
        )
    subset = "" if set(families) == set(MUJOCO_FAMILIES) else "_" + "_".join(families)
    path = bench.write_record(
        "env_throughput_mujoco" + subset,
        results,
        targets,
        rows,
        notes=(
            f"{num_envs} envs x {num_steps} steps in one jitted lax.scan, "
            f"{rounds} paired rounds; ratio = Brax's seconds / ours per round "
            "(median, bootstrap 95% CI), against Brax's bare step (the target) "
            "and its training env with auto-reset and per-env physics "
            "(reported), and for *_params families its bare step on the same "
            "task physics drawn inside the call, as ours (reported: what the "
            "family adds), and Brax's bare step on its default physics passed "
            "as data over its constant-physics self (reported: what physics "
            "as data costs MJX); a target is met only when its whole CI is "
            "above 0.9; steps/s of every side from the round whose ratio to "
            "Brax's bare step is the median (the round nearest it with an even "
            "number of rounds); "
            f"compile time excluded (listed). {bench.load_note(load_start)}."
        ),
    )
    print(bench.markdown_table(rows))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
