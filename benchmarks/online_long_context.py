"""Transformer PPO on long trials: memory and step time against context length.

Trials of Dark Room 9x9 (H=20) episodes, ``--episodes`` per trial (the
context: 20 steps an episode, e.g. 100 episodes = 2,000 steps), trained
with ReLIC's partial updates every ``--update-every`` steps. For each
length the trainer's one-trial update (acting with the KV cache, the
partial updates, re-encoding) is compiled and XLA's memory analysis
recorded: ``temp`` (the program's scratch: activations, scores, caches
inside the scans) and ``argument`` bytes (weights, optimizer), next to the
size of the KV caches (the actor's acting cache and the critic's, all
layers: the memory a trial of that length cannot do without). The claim:
with partial updates the program's memory grows like the cache (linearly
in the context), because each update trains its K steps against the fixed
cache of the steps before them; updating once per trial on the whole
trial (``K = L``, compiled at the shorter lengths only) grows faster.
Step time: one update timed (best of 2, compile excluded) at each length
with partial updates, split into acting (the trial's KV-cache decoding
steps), re-encoding (the caches rebuilt with new weights at each partial
update) and the rest (the partial updates' forward/backward, GAE, the
env); env steps/s. ``cache copies in loops``: whole-KV-cache copies in the
compiled update's loop bodies (the HLO copy counter), 0 when every cache
write is in place. The growth targets: acting time at most quadratic in
the context (each step reads the cache once), and time per partial update
at most quadratic (a trial of L / K updates then grows like L**3 / K;
like L**2 with a fixed number of updates per trial, as ReLIC).
``compile s``: the update's compile time per length (the re-encoding is a
loop-based prefill whose compiled size does not grow with L). The results
files are rewritten after every row, so an interrupted run keeps its rows.

    agentrl bench online_long_context [--episodes 10 25 50 100]
        [--update-every 100] [--envs 8] [--whole-upto 500] [--no-time]
"""

from __future__ import annotations

import argparse
import os
import time

import common as bench
import jax
import jax.numpy as jnp
from hlo_tools import cache_shapes, count_copies

from agentrl.cliargs import positive_int


def model_config(layers: int = 2, width: int = 64, heads: int = 4, **changes):
    from agentrl.models import ModelConfig

    return ModelConfig(
        num_layers=layers,
        num_heads=heads,
        d_model=width,
        d_ff=4 * width,
        dropout=0.0,
        obs_encoding="grid",
        **changes,
    )


def make_trainer(env, episodes, update_every, num_envs, model, minibatches=2):
    """A :class:`agentrl.online.transformer.TransformerPPO` for ``episodes``
    episodes of ``env`` per trial (one update program, 1 epoch)."""
    from agentrl.algos import TransformerPPO
    from agentrl.online.transformer import TransformerPPO as Trainer
    from agentrl.online.transformer import TransformerShape
    from agentrl.train.config import complete_model_config

    algo = TransformerPPO(
        trial_episodes=episodes, num_envs=num_envs, num_minibatches=minibatches
    )
    steps = episodes * env.horizon
    shape = TransformerShape(
        num_envs=num_envs,
        trial_steps=steps,
        update_every=update_every or steps,
        num_epochs=1,
        num_minibatches=minibatches,
        num_updates=1,
        grad_clip=0.5,
    )
    cfg = complete_model_config(model, env, algo)
    return Trainer(env, shape, cfg, env.sample_params)


def compiled_update(trainer, hp):
    state = jax.jit(trainer.init)(jax.random.key(0), hp)
    start = time.perf_counter()
    compiled = jax.jit(trainer.update).lower(state, hp).compile()
    return compiled, state, time.perf_counter() - start


def cache_bytes(trainer) -> int:
    """Bytes of the actor's and the critic's KV caches for the whole trial."""
    c, s = trainer.config, trainer.shape
    return 2 * (2 * c.num_layers * s.num_envs * s.trial_steps * c.d_model * 4)


def part_programs(trainer, state, hp):
    """Jitted parts of one trial's update, for the time breakdown.

    ``act``: the trial's ``L`` KV-cache decoding steps in every env (the
    acting scan without the env: the logged tokens fed back); ``reencode``:
    the trial's re-encodings (per chunk the critic's cache of the steps
    before it and, but after the last chunk, the actor's of the steps up
    to its end). The rest of the update (the partial updates' forward and
    backward passes, GAE, the env) is the whole update minus these.
    """
    _, _, buf, _ = jax.jit(trainer.run_trial)(state, hp)
    n, length = buf["action"].shape
    k_len = trainer.shape.update_every

    def act(actor, buf):
        model = trainer.model(actor)
        prev_a = jnp.pad(buf["action"], ((0, 0), (1, 0)))[:, :-1]
        prev_r = jnp.pad(buf["reward"], ((0, 0), (1, 0)))[:, :-1]

        def body(cache, t):
            out, cache = model.decode(
                cache, buf["obs"][:, t], prev_a[:, t], prev_r[:, t]
            )
            return cache, out.action

        return jax.lax.scan(body, model.init_cache(n, length), jnp.arange(length))[1]

    def reencode(actor, critic, buf):
        def body(total, c):
            start, end = c * k_len, (c + 1) * k_len
            a = trainer._encode(critic, buf, start)
            b = trainer._encode(actor, buf, jnp.where(end < length, end, 0))
            touch = a.keys[-1][..., -1].sum() + b.keys[-1][..., -1].sum()
            return total + touch, None

        return jax.lax.scan(body, jnp.zeros(()), jnp.arange(length // k_len))[0]

    programs = {"act": (jax.jit(act), (state.actor, buf))}
    if k_len < length:
        programs["reencode"] = (jax.jit(reencode), (state.actor, state.critic, buf))
    return programs


def measure(trainer, hp, timed: bool) -> dict:
    compiled, state, compile_s = compiled_update(trainer, hp)
    mem = compiled.memory_analysis()
    cache = trainer.model(state.actor).init_cache(
        trainer.shape.num_envs, trainer.shape.trial_steps
    )
    out = {
        # whole-KV-cache copies inside the update's loops (run per step or
        # per partial update; 0: every cache write is in place)
        "cache_copies_in_loops": count_copies(compiled.as_text(), cache_shapes(cache)),
        "context_steps": trainer.shape.trial_steps,
        "update_every": trainer.shape.update_every,
        "temp_bytes": int(mem.temp_size_in_bytes),
        "argument_bytes": int(mem.argument_size_in_bytes),
        "cache_bytes": cache_bytes(trainer),
        "compile_s": compile_s,
    }
    if timed:
        state, _ = jax.block_until_ready(compiled(state, hp))  # warm
        seconds = bench.timeit(lambda s: compiled(s, hp), state, repeats=2)
        steps = trainer.shape.num_envs * trainer.shape.trial_steps
        out.update(update_s=seconds, env_steps_per_s=steps / seconds)
        for name, (fn, args) in part_programs(trainer, state, hp).items():
            jax.block_until_ready(fn(*args))  # compile
            out[f"{name}_s"] = bench.timeit(fn, *args, repeats=2)
    return out


def growth(rows: list[dict], key: str) -> float:
    """Log-log slope of ``key`` against context length (1: linear, 2: quadratic)."""
    import math

    a, b = rows[0], rows[-1]
    return math.log(b[key] / a[key]) / math.log(b["context_steps"] / a["context_steps"])


def _table_row(episodes: int, r: dict) -> dict:
    """One markdown row of a :func:`measure` record (times NaN if untimed)."""
    nan = float("nan")
    return {
        "episodes": episodes,
        "context steps": r["context_steps"],
        "K": r["update_every"],
        "temp MiB": r["temp_bytes"] / 2**20,
        "KV caches MiB": r["cache_bytes"] / 2**20,
        "temp / caches": r["temp_bytes"] / r["cache_bytes"],
        "cache copies in loops": r["cache_copies_in_loops"],
        "compile s": r["compile_s"],
        "update s": r.get("update_s", nan),
        "act s": r.get("act_s", nan),
        "re-encode s": r.get("reencode_s", nan),
        "rest s": r.get("update_s", nan)
        - r.get("act_s", nan)
        - r.get("reencode_s", nan),
        "env steps/s": r.get("env_steps_per_s", nan),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="agentrl bench online_long_context", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--episodes", type=positive_int, nargs="+", default=[10, 25, 50, 100]
    )
    parser.add_argument("--update-every", type=positive_int, default=100)
    parser.add_argument("--envs", type=positive_int, default=8)
    parser.add_argument("--layers", type=positive_int, default=2)
    parser.add_argument("--width", type=positive_int, default=64)
    parser.add_argument(
        "--whole-upto",
        type=int,
        default=500,
        help="also compile K = L (one update per trial) up to this many steps",
    )
    parser.add_argument("--sink", action="store_true", help="model.attention_sink")
    parser.add_argument("--no-time", action="store_true", help="memory only")
    args = parser.parse_args(argv)
    from agentrl.envs import make as make_env
    from agentrl.online.ppo import trial_hparams

    env = make_env("darkroom", size=9, horizon=20)
    for e in args.episodes:
        steps = e * env.horizon
        if steps % args.update_every or steps == args.update_every:
            parser.error(
                f"--update-every {args.update_every} must divide every trial's "
                f"steps and be fewer ({e} episodes x {env.horizon} = {steps}; "
                "one update per trial is --whole-upto's row)"
            )
    hp = trial_hparams(lr=3e-4, reward_scale=0.1)
    model = model_config(args.layers, args.width, attention_sink=args.sink)
    partial, whole, rows = [], [], []
    for e in sorted(args.episodes):
        trainer = make_trainer(env, e, args.update_every, args.envs, model)
        r = measure(trainer, hp, not args.no_time)
        partial.append(r)
        row = _table_row(e, r)
        rows.append(row)
        print(row, flush=True)
        # the rows so far: an interrupted run keeps what it measured
        write(args, partial, whole, rows)
        if r["context_steps"] <= args.whole_upto:
            w = measure(make_trainer(env, e, 0, args.envs, model), hp, False)
            whole.append(w)
            row = _table_row(e, w)
            rows.append(row)
            print(row, flush=True)
            write(args, partial, whole, rows)
    path = write(args, partial, whole, rows)
    print(bench.markdown_table(rows))
    print(f"wrote {path}")


def write(args, partial: list[dict], whole: list[dict], rows: list[dict]):
    """Write the results of the rows measured so far (the growth targets
    once two lengths are in); returns the JSON path."""
    partial = [dict(r) for r in partial]
    results = {"partial_updates": partial, "whole_trial": whole}
    targets = []
    if len(partial) > 1:
        slope = growth(partial, "temp_bytes")
        results["temp_growth_partial"] = slope
        targets.append(
            bench.target(
                "temp memory growth with context (log-log slope), partial updates",
                slope,
                1.2,
                False,
            )
        )
    if len(partial) > 1 and "update_s" in partial[0]:
        for key in ("update_s", "act_s", "reencode_s"):
            results[f"{key[:-2]}_time_growth"] = growth(partial, key)
        # per partial update: the trial's time over its L / K updates
        for r in partial:
            r["update_s_per_chunk"] = (
                r["update_s"] * r["update_every"] / r["context_steps"]
            )
            r["reencode_s_per_chunk"] = (
                r["reencode_s"] * r["update_every"] / r["context_steps"]
            )
        per_update = growth(partial, "update_s_per_chunk")
        results["time_per_partial_update_growth"] = per_update
        targets.append(
            bench.target(
                "acting time growth with context (log-log slope; 2: quadratic)",
                results["act_time_growth"],
                2.2,
                False,
            )
        )
        targets.append(
            bench.target(
                "time per partial update growth with context (log-log slope)",
                per_update,
                2.2,
                False,
            )
        )
    if len(whole) > 1:
        results["temp_growth_whole"] = growth(whole, "temp_bytes")
    notes = (
        f"Dark Room 9x9 H=20; {args.envs} envs per trial, 2 minibatches, 1 "
        f"epoch; transformer {args.layers} layers x width {args.width}, 4 heads"
        f"{', Sink-KV' if args.sink else ''} (actor and critic). 'temp': XLA's "
        "memory analysis of the compiled one-trial update (scratch beyond "
        "arguments and outputs); 'KV caches': actor + critic caches of the "
        "whole trial (float32, all layers). K = L rows: one update per trial on "
        "the whole trial's forward/backward (compiled only). 'update s': one "
        "trial's update (acting + partial updates), best of 2, compile "
        "excluded; 'compile s': lowering and compiling the one-trial update "
        "(wall time); 'act s': the trial's L cached decoding steps alone; "
        "'re-encode s': its re-encodings alone (critic before and actor after "
        "each partial update); 'rest s': update - act - re-encode (the "
        "partial updates' passes, GAE, the env). 'cache copies in loops': "
        "whole-KV-cache copies in the compiled update's loop bodies. The "
        "machine may be shared with other jobs (1-minute load average when "
        f"written: {os.getloadavg()[0]:.1f}), so times are noisy: compare "
        "ratios within one run."
    )
    return bench.write_record("online_long_context", results, targets, rows, notes)


if __name__ == "__main__":
    main()
