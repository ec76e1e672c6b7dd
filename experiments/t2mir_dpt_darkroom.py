"""T2MIR-DPT vs DPT on Dark Room at equal training budget.

``dpt_darkroom`` with T2MIR's MoE in the last layer (token-wise: 6 experts,
top-2, balance weight 0.01; task-wise: 8 experts, top-2, routed per token as
in T2MIR's Dark Room configs, contrastive weight 0.001 as the paper uses for
DPT Dark Room). The contrastive loss averages the router's logits over the
context tokens, the query token left out (as the reference), and its
positives are two *different* roll-ins of a task
(``agentrl.data.samplers.pair_rows``): before, both rows of a pair were the
same context (the context is every step of a one-episode roll-in, so both
started at step 0), and a paired batch saw half as many distinct histories
as DPT's. ``smoke``/``cpu``/``gpu``/``full`` as in ``dpt_darkroom``, so
the two compare at equal budget (``full``: the DPT reference's constant
rate, no clip, 250,000 updates; T2MIR's own DPT training, warm-up and
cosine with a clip at norm 1, is not a preset here);
``t2mir_setup`` / ``t2mir_setup_gpu``: T2MIR's own DPT setup (9x9, H=20, 81 goals
65/16) against ``dpt_darkroom``'s presets of the same name.

Session 50 brought T2MIR's MoE to its reference's form (docs/fidelity.md,
item 15): gates ``Linear(d, E) -> tanh -> Linear(E, E)`` without biases, the
unbiased CV^2 in the balance loss, the contrast over the other half-batch's
``B/2`` keys, the bilinear ``W`` drawn N(0, 1), and the contrast still on
the logits, as T2MIR-DPT's configs (``add_softmax: False``,
``algo.contrast_softmax=False``). Re-run after these changes on DPT's
cpu preset (session 52, ``agentrl reproduce t2mir_dpt_darkroom --compare
dpt_darkroom --preset cpu --seeds 3``, both retrained; validation chose
``sample`` for both in every seed, T2MIR-DPT's unresolved in seed 2):
T2MIR-DPT 1.10 -> 17.7 [7.3, 31.0] (score 0.19), DPT 0.77 -> 21.0 [10.1,
33.1] (0.22); **T2MIR-DPT minus DPT -3.3 [-21.4, 13.6]**: no difference
shown; against the runs before (same seeds, goals and keys) T2MIR-DPT
+1.6 [-2.7, 8.5], DPT +0.2 [-2.9, 3.1]
(``paired_t2mir_dpt_darkroom_session52_vs_before``,
``paired_dpt_darkroom_session52_vs_before``). The other measurements
quoted here were made before these changes.

With the query drawn as the DPT reference draws it (session 49: a state
independent of the context, ``dpt_darkroom``'s docstring), ``agentrl
reproduce t2mir_dpt_darkroom --compare dpt_darkroom --preset cpu --seeds
3`` (DPT's runs of its own 5-seed reproduction, seeds 0-2; 10 test goals
a seed; validation chose sampling, ``sample_then_greedy`` for T2MIR-DPT
in seed 2): T2MIR-DPT 0.50 -> 16.1 [6.5, 28.7] over the last 10 of 40
episodes (score 0.17), DPT 1.27 -> 20.7 [9.8, 32.5] (0.22); paired
difference -4.6 [-23.4, 13.7], per seed +3.3, -22.8, +5.7: no difference
shown (``repro_t2mir_dpt_darkroom_vs_dpt_darkroom_cpu_before_session52``;
the run before,
with the query one of the context's states, is
``..._cpu_query_in_context``: +18.0 [-5.0, 40.2]).

Every measurement below was made before session 49, when DPT's query
was one of its context's own states.

On T2MIR's own DPT setup, with these changes (``agentrl reproduce
t2mir_dpt_darkroom --compare dpt_darkroom --preset t2mir_setup --seeds 5``,
the reference's corner start and uniform roll-in, 6,000 updates of batch
32 on 10,000 roll-ins of 20 transitions, context 20, 40 episodes; 5 seeds x
8 test goals, each seed with its own data and split; validation chose
sampling for both in every seed): both stay near chance, T2MIR-DPT 1.04
[0.23, 2.08] over the last 10 episodes (score 0.06), DPT 1.34 [0.27,
2.85] (score 0.08), random 0.09, oracle 12.4; difference -0.30 [-1.61,
0.90] (3 seeds: +0.42 [-0.42, 1.87];
``repro_t2mir_dpt_darkroom_vs_dpt_darkroom_t2mir_setup``). A context of
20 uniform transitions in 81 cells rarely holds the goal, and online the
context holds only the last episode, so neither model can place the goal
at this budget; the comparison says nothing about T2MIR here. The cpu
preset (10x10, H=100) was not re-run.

Context length, checked against NJU-RL/T2MIR (``T2MIR-DPT/configs/
args_darkroom_v0.yaml``, ``algorithms/policy.py``, ``algorithms/
evaluation.py``): the reference trains on a prompt of one whole 20-step
episode (``prompt_episode_horizon: 1``, ``prompt_horizon: 20``) and sizes
its model for it (a 21-slot timestep embedding, GPT-2 ``n_positions`` 63);
its config's ``eval_horizon: 100`` would feed online evaluation prompts of
up to five past episodes (100 steps), which that model cannot embed, so
the published config is inconsistent and ``context_size=20`` (the last
episode as context, as its model allows) is kept. Named deviation: the
reference's prompt is an episode of its downloaded ``mixed`` dataset (a
source's learning histories, not published as code), where
``t2mir_setup`` uses DPT's reference roll-in (20 uniform transitions);
so T2MIR's context holds a goal visit whenever its source's episode did,
ours only by chance, which is one reason both models stay at chance here.

``agentrl reproduce t2mir_dpt_darkroom --compare dpt_darkroom
--preset cpu --seeds 3`` trains both on the same data, updates and seeds
(DPT's runs and results shared with its own reproduction). With the
changes above, ``dpt_darkroom``'s corner start and uniform roll-in and the
validation protocol (3 seeds x 10 test goals, 6,000 updates; validation
chose sampling, and ``sample_then_greedy`` for T2MIR-DPT in seed 1):
T2MIR-DPT 2.10 -> 38.2 [8.6, 63.4] over the last 10 of 40 episodes (score
0.41 [0.09, 0.69]), DPT 1.13 -> 20.3 [10.2, 34.1] (0.21); paired
difference +18.0 [-5.0, 40.2], per seed -5.3, +25.0, +34.2: ahead in two
of three seeds, the CI includes 0. Before these changes (3 seeds x 16
goals, centre start, trajectory roll-in, sequence-mean routing, identical
positives): T2MIR-DPT 48.3 vs DPT 56.5, -8.1 [-15.8, -0.7]; at 1,200
updates -2.23 [-3.68, -0.89] (``_steps1200``).
"""

import dataclasses

import dpt_darkroom
from _t2mir import moe_last

from agentrl.algos import T2MIR
from agentrl.train.experiments import make_presets

BASE = dataclasses.replace(
    dpt_darkroom.BASE,
    name="t2mir_dpt_darkroom",
    # T2MIR-DPT's Dark Room config contrasts the logits (add_softmax: False)
    algo=T2MIR(
        base=dpt_darkroom.BASE.algo,
        balance_weight=0.01,
        contrastive_weight=0.001,
        contrast_softmax=False,
    ),
    model=dataclasses.replace(
        dpt_darkroom.BASE.model,
        moe_layers=(dpt_darkroom.BASE.model.num_layers - 1,),
        task_routing="token",
    ),
)

LAYERS = BASE.model.num_layers
CHANGES = {p: moe_last(c, LAYERS) for p, c in dpt_darkroom.CHANGES.items()}
PRESETS = make_presets(BASE, **CHANGES)
