"""AD-ε on Dark Key-to-Door 9x9 (H=40) from the noise curriculum.

The AD-ε reference's Key-to-Door (corl-team/ad-eps ``key_to_door/``;
docs/references.md "AD-ε"): the agent sees only its cell, starts each
episode at a random cell, and gets 1 for the key and 1 for the door while
holding it (the episode ends there), so it must remember within an
episode whether it holds the key and across episodes where key and door
are. The (key, door) pair is the task: here any two distinct cells, 6,480
ordered pairs (the reference's are fewer: deviations below), split
80/10/10 into training, validation and test pairs. The histories are the
oracle acting ε-greedily with ε decayed per step from 1 to 0.3 over 90% of
each history (``noisy_oracle``, as ``ad_eps_darkroom``); the model, loss
and any-step windows of 4 episodes (160 steps, the reference's
``seq_len``) are AD's.

The context matters more here than on Dark Room: a Dark Room goal is found
once and revisited, a key-to-door pair needs two cells remembered and the
key's state inside the episode. That makes it the family on which RA-DT's
claim (``radt_key_to_door``: AD's improvement with a fraction of its
context) is tested; AD-ε with one episode of context (``--set
algo.context_episodes=1``, 40 steps) is the short-context control.

Until session 50 the per-step ε count did not skip the steps an episode
left unused when it ended early (the reference's ``steps_diff``;
docs/fidelity.md item 14): the curriculum ran ahead of the stated 90% (ε
~0.52 half-way instead of ~0.61). The cpu preset's 5 seeds were re-run in
session 51 with the fix (below); the other measurements predate it.

Deviations from the reference: the cpu preset's data (1,000 pairs with one
history of 40 episodes each, not 2,000), model (3 layers width 64) and
updates (below); the reference's 300 evaluation episodes cut to 60 (cpu).
In every preset, the tasks and starts: the reference keeps only the pairs
whose key and door differ in both coordinates (never in one row or
column: 5,184 pairs, ``key_to_door/utils/misc.py``) and never starts the
agent on the key (its reset redraws, ``envs/dark_key_to_door.py``), where
ours takes any two distinct cells and any start cell. The env's
``layout="off_axis"`` (``data.env_args`` with ``("layout", "off_axis")``)
gives the reference's; the presets keep the default because every result
below was made on it. A random policy returns 0.209 on ours and 0.196 on
the reference's (exact over every task and start, 9x9, H=40; 400k-episode
Monte Carlo through the env 0.2080 / 0.1957 +- 0.0007): ours is ~6%
easier for it (4.4% of our pairs put the door next to the key; none of
the reference's do).

- ``smoke``: seconds; plumbing.
- ``cpu``: 1,000 training pairs, one history of 40 episodes each (ε 1 →
  0.3 over 90%), windows of every episode, 3,000 updates of batch 32, 16
  test pairs x 60 episodes; ``agentrl reproduce ad_eps_key_to_door
  --preset cpu --seeds 5``, 10-25 minutes a seed on the 2-core CPU with
  other jobs. Measured (session 51, AMD EPYC, 5 seeds x 16 test pairs,
  validation chose ``sample`` in every seed, 3 resolved): return 0.21 ->
  0.52 [0.36, 0.68] over the last 10 of 60 episodes (random 0.24, oracle
  2, the noisy oracle learning online 1.98), 0.26x [0.18, 0.34] the data's
  best (target ``beats_its_data``: not met); before item 14's fix 0.23 ->
  0.49 [0.37, 0.62], +0.02 [-0.11, 0.17] paired
  (``paired_ad_eps_key_to_door_session51_vs_before``). With one episode
  of context (``--set algo.context_episodes=1``, seeds 0-2, session 51)
  0.19 -> 0.27 [0.18, 0.37], +0.25 [0.08, 0.45] for the 4-episode context
  (``paired_ad_eps_key_to_door_context_lengths_session51``). Before the
  fix: with one episode of context 0.26, a paired difference of +0.23
  [0.05, 0.39] for the 4-episode context (docs/results.md). Far below
  the reference's result: this is 1/1,500 of its training samples. With
  4x the updates (``--set train.steps=12000``, seeds 0-1, ~28 minutes
  of training a seed beside another job; re-run in session 52 after item
  14) 0.25 -> 1.25 [1.04, 1.47], 0.63x [0.53, 0.74] the data's best,
  +0.83 [0.48, 1.09] over 3,000 updates on the same pairs, -0.03 [-0.30,
  0.21] against the run before item 14 (0.19 -> 1.29, 0.66x;
  ``paired_ad_eps_key_to_door_steps12000_session52``): the budget is the
  lever; the
  preset keeps 3,000 so that a seed fits ~15 minutes.
- ``gpu``: ``ad_darkroom``'s gpu model (4 layers, 8 heads, width 512,
  batch 512, lr 3e-4; the reference's code: 4 heads, batch 8) on 1,000
  histories of 400 episodes, 3,000 updates, 100 evaluation
  episodes; for one GPU (not run).
- ``full``: the reference: 1,000 pairs x 2,000 episodes, 300k updates of
  batch 8 (``ad_dark_key2door.py``'s default, which ``configs/ad-k2d.yaml``
  does not change), 4 heads, no weight decay, 300 evaluation episodes;
  for a GPU (batch and training since session 44; it ran batch 512).
  Named deviations left: the reference warms up over a tenth of one pass
  over its windows, at batch 8 about 25,000 x the mean episode length
  (derived from the code, not run): longer than its 300k updates, so its
  rate rises linearly the whole run and never decays, where ours warms up
  for 10,000 and decays by a cosine to 0; its embedding, positions and
  fp16 as ``ad_eps_darkroom``'s. Its three tokens per step are matched in
  ``full`` (``ad_eps_darkroom.REFERENCE_TOKENS``, session 69), its exact
  GELU in ``gpu`` and ``full`` (``ad_eps_darkroom.REFERENCE_ACTIVATION``,
  session 69; ``cpu`` keeps the tanh form of its records). Its Adam betas
  (0.9, 0.99) and dropout rates (attention weights 0.5, residual 0.1,
  embedding 0.3; ``ad_dark_key2door.py`` lines 44-46 and 51) are matched
  (``ad_eps_darkroom.REFERENCE_ADAM_AND_DROPOUT``). Data: the reference's script
  offers ``max_perf`` 1.0 (ε to 0) or 0.5 (ε to 0.75, its README's
  example); the preset's ε to 0.3 is the paper's 70% target.
"""

import dataclasses

import ad_darkroom
import ad_eps_darkroom

from agentrl.train.experiments import make_presets, steps_fields

ENV = (("size", 9), ("horizon", 40))

BASE = dataclasses.replace(
    ad_eps_darkroom.BASE,
    name="ad_eps_key_to_door",
    data=dataclasses.replace(
        ad_eps_darkroom.BASE.data,
        env="dark_key_to_door",
        env_args=ENV,
        num_tasks=1000,
        num_episodes=40,
    ),
    train=dataclasses.replace(
        ad_eps_darkroom.BASE.train, steps=3000, log_every=100, checkpoint_every=750
    ),
    eval=dataclasses.replace(
        ad_eps_darkroom.BASE.eval, num_episodes=60, acting="sample_then_greedy"
    ),
)
CHANGES = dict(
    smoke={
        **ad_darkroom.CHANGES["smoke"],
        "data.env_args": (("size", 5), ("horizon", 10)),
        "data.source_args": ad_eps_darkroom.CURRICULUM,
    },
    cpu={},
    gpu={
        **ad_darkroom.PAPER_MODEL,
        **ad_eps_darkroom.REFERENCE_ACTIVATION,
        "model.compute_dtype": "bfloat16",
        "data.num_episodes": 400,
        **steps_fields(3000),
        "eval.num_episodes": 100,
    },
    full={
        **ad_darkroom.PAPER_MODEL,
        **ad_eps_darkroom.REFERENCE_TRAINING,
        # ad_dark_key2door.py lines 44-46 (dropout 0.5 / 0.1 / 0.3) and 51
        # (betas (0.9, 0.99)): dark_room's values
        **ad_eps_darkroom.REFERENCE_ADAM_AND_DROPOUT,
        **ad_eps_darkroom.REFERENCE_ACTIVATION,
        **ad_eps_darkroom.REFERENCE_TOKENS,
        "train.batch_size": 8,  # ad_dark_key2door.py's default; ad-k2d.yaml keeps it
        "data.num_episodes": 2000,
        **steps_fields(300_000),
        "eval.num_episodes": 300,
        "eval.acting": "greedy",
    },
)
PRESETS = make_presets(BASE, **CHANGES)

# the targets `agentrl reproduce` judges it by (agentrl.evaluate.targets)
TARGET = "beats_its_data"
