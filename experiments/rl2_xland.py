"""RL² on XLand-MiniGrid rulesets: a GRU learner that finds each ruleset's goal.

The meta-RL baseline of xland-minigrid (``training/train_meta_task.py``,
Nikulin et al., 2023) trained as agentrl's RL² (:class:`agentrl.algos.RL2`):
a GRU policy, its input the observation with the previous action and
reward, trained by PPO over trials of several episodes of one ruleset, the
hidden state kept across the trial's episodes and reset between trials.
Training rulesets are the 80% train split; evaluation runs one trial of
``eval.num_episodes`` episodes on held-out rulesets (never trained on) in
the standard harness, next to the random baseline. The in-context gain is
the last episodes' return over the first's.

**Benchmark.** The baseline's default, ``trivial`` on ``R1-9x9`` (one room,
9x9, 243-step episodes): rulesets with no rules (chain depth 0), a single
goal, the goal's object among 3 distractors. It is the smallest benchmark
(the one xland-minigrid recommends for quick iterations): the other
benchmarks add rule chains of depth 1-3 and, in the paper's meta-RL runs,
13x13 four-room grids and 10B steps, beyond a 2-core CPU budget. The
published ruleset files are downloaded from HuggingFace on first use; to
run offline, the presets use agentrl's locally generated rulesets of the
same shape (:func:`agentrl.envs.xland.generate_rulesets`, ``ruleset_seed``
0, 3 distractors, no rules). With the file present,
``--data.env_args "rulesets=trivial-21k"`` trains on the baseline's default
table since xminigrid 0.9.2: 21,000 trivial rulesets re-sampled without
duplicate (goal, rules) encodings. It is not ``trivial-1m`` renamed: that
was ``trivial_1m_v2`` (xminigrid 0.7-0.9.1; 1M rulesets, duplicates kept,
the table of XLand-Trivial-20B), another table: re-sampling every duplicate
makes a ruleset id name different rulesets in the two from the first
duplicate on. ``rulesets=/path/to/trivial_1m_v2`` (the downloaded file)
trains on that one.

**Observations** (``observation="onehot"``, :mod:`agentrl.envs.xland`): each
cell of the 5x5 egocentric view as one-hot tile and colour, plus the agent's
direction one-hot (the baseline's ``DirectionObservationWrapper``). RL²'s
first linear layer over this vector is a per-cell embedding of tile and
colour (the baseline embeds each id with 16 units and concatenates).

Settings from the baseline: PPO with ``clip_eps=0.2``, ``gamma=0.99``,
``gae_lambda=0.95``, ``ent_coef=0.01``, ``vf_coef=0.5``, grad-norm clip
0.5, lr 1e-3, 32-step rollouts (``num_steps_per_update``), one epoch.
Deviations (and why):

- Trials are ``trial_episodes`` episodes (16 in ``gpu``, up to 3,888 steps),
  not 4,096 steps with auto-resets: agentrl's trial wrapper counts episodes,
  so every trial has the same number of chances to use what it found.
- One shared ``hidden``-wide layer in each head (the baseline: 256 units
  after a 1,024-unit GRU) and a ReLU input embedding of ``embed`` units
  before the GRU (the baseline feeds the concatenated embeddings straight
  in); the learning rate is constant (the baseline decays it linearly).
- The rulesets: 2 of ``trivial``'s 11 goal types (pick up X, stand next to
  X), generated locally (above), 4,096 of them in ``gpu``.
- The budget: ``gpu`` runs 8,192 trials x 32 steps x 400 updates (~105M
  env steps, the baseline's 100M); ``cpu`` is far smaller (below).
- PPO details agentrl's online learners share: Adam's epsilon 1e-5
  (PureJaxRL's; the baseline's ``make_states`` sets 1e-8); a trial's end
  is terminal (no bootstrap into the next task, RL²'s objective), where
  the baseline's ``done`` is always false, so its last update of a trial
  bootstraps from the next state's value; the input carries a
  new-episode flag (Duan et al.'s RL² has it; the baseline's does not).

Presets:

- ``smoke``: 16 rulesets, 20-step episodes, trials of 2, a few updates
  (run by tests/test_rl2_xland.py).
- ``cpu``: 1,024 rulesets, 243-step episodes, trials of 4 episodes, 128
  trials x 32 steps x 600 updates (~2.5M env steps), 128 GRU units.
  Measured (1 seed, 7 min 18 s on the shared 2-core CPU, load ~15-19;
  ``agentrl eval``, 32 held-out rulesets): return of episode 1 0.926
  [0.908, 0.942], of the last 4 0.918 [0.900, 0.932]; random 0.266 /
  0.313. The learner generalises to unseen rulesets but shows no in-context
  gain: in one room with no rules, visiting each object in turn meets
  either goal type within the first episode (about 23 steps), so memory of
  which object paid has little left to save. Five seeds in one vmapped
  sweep (``agentrl sweep rl2_xland --preset cpu --seeds 5``, scored on
  the test rulesets as sweeps were before session 53; ``--split test``
  now): held-out return of the last episode 0.928 [0.916, 0.939]
  (``benchmarks/results/sweep_rl2_xland_cpu/``). Rule chains (``small``,
  chain depth 1) are where a trial's memory matters; they need the
  published benchmark file.
- ``full`` / ``gpu``: the baseline's sizes above, 1,024 GRU units.
"""

from agentrl.algos import RL2
from agentrl.train.config import DataConfig, EvalConfig, ExperimentConfig
from agentrl.train.experiments import make_presets, online_train_config, steps_fields

ENV_ARGS = (
    ("env_id", "XLand-MiniGrid-R1-9x9"),
    ("num_rulesets", 1024),
    ("ruleset_seed", 0),
    ("num_distractors", 3),
    ("observation", "onehot"),
)

BASE = ExperimentConfig(
    name="rl2_xland",
    algo=RL2(
        trial_episodes=4,
        num_envs=128,
        rollout_steps=32,
        num_epochs=1,
        num_minibatches=4,
        hidden=128,
        embed=128,
        gamma=0.99,
        gae_lambda=0.95,
        clip_eps=0.2,
        ent_coef=0.01,
        vf_coef=0.5,
        obs_encoding="onehot",
    ),
    data=DataConfig(env="xland", env_args=ENV_ARGS, source="random"),
    train=online_train_config(
        steps=600,
        lr=1e-3,
        schedule="constant",
        log_every=10,
        checkpoint_every=150,
    ),
    eval=EvalConfig(num_tasks=32, num_episodes=4),
)
CHANGES = dict(
    smoke={
        "data.env_args": (
            *ENV_ARGS[:1],
            ("num_rulesets", 16),
            *ENV_ARGS[2:],
            ("horizon", 20),
        ),
        "algo.trial_episodes": 2,
        "algo.num_envs": 8,
        "algo.rollout_steps": 8,
        "algo.hidden": 16,
        "algo.embed": 16,
        **steps_fields(4, logs=2, checkpoints=2),
        "eval.num_tasks": 2,
        "eval.num_episodes": 2,
    },
    cpu={},
    full={
        "data.env_args": (*ENV_ARGS[:1], ("num_rulesets", 4096), *ENV_ARGS[2:]),
        "algo.trial_episodes": 16,
        "algo.num_envs": 8192,
        "algo.num_minibatches": 16,
        "algo.hidden": 1024,
        "algo.embed": 512,
        **steps_fields(400),
        "eval.num_tasks": 256,
        "eval.num_episodes": 16,
    },
)
CHANGES["gpu"] = CHANGES["full"]
PRESETS = make_presets(BASE, **CHANGES)
