"""In-context learners, one module each, behind one protocol.

Each algorithm is an :class:`~agentrl.algos.base.Algorithm`: a frozen
dataclass of its hyperparameters that owns its config checks, model needs,
batch sampler, loss, auxiliary state, traced hyperparameters and acting in
context (see :mod:`agentrl.algos.base` for the protocol, including how a
learner trained online by RL plugs in). Registered names:

- ``ad`` (:class:`AD`), ``ad_eps`` (:class:`ADEps`: AD on noise-curriculum
  data);
- ``dpt`` (:class:`DPT`);
- ``dt`` (:class:`DT`: return-conditioned, evaluated with a target return);
- ``radt`` (:class:`RADT`: a short context plus sub-trajectories retrieved
  from an external memory);

- ``meta_dt`` (:class:`MetaDT`): DT conditioned on a world model's task
  representation and a prompt of the largest world-model error;
- ``t2mir_ad`` / ``t2mir_dpt``: :class:`T2MIR` wrapping AD or DPT;
- ``rl2`` (:class:`RL2`): a GRU policy trained online by PPO over
  multi-episode trials (no dataset; :mod:`agentrl.online`);
- ``transformer_ppo`` (:class:`TransformerPPO`): the causal transformer
  trained online by PPO over trials, with ReLIC's partial updates;
- ``amago`` (:class:`Amago`): the causal transformer as a multi-gamma
  actor-critic trained off-policy from a replay of whole trials.

>>> from agentrl import algos
>>> algos.get("t2mir_ad")          # the registered defaults
>>> algos.DPT(context_size=40)      # or build one with its fields

Training, sweeps and evaluation only ask the object; nothing outside this
package compares algorithm names. A new learner is a subclass in one module
decorated with :func:`register_algorithm`
(``notebooks/04_custom_algorithm.ipynb``).
"""

from agentrl.algos.ad import AD, ADEps, ad_loss
from agentrl.algos.amago import Amago
from agentrl.algos.base import Algorithm, get, names, register_algorithm
from agentrl.algos.dpt import DPT, dpt_loss
from agentrl.algos.dt import DT, DTModelAgent, dt_loss, returns_to_go
from agentrl.algos.meta_dt import MetaDT
from agentrl.algos.radt import RADT
from agentrl.algos.rl2 import RL2
from agentrl.algos.t2mir import T2MIR
from agentrl.algos.transformer_ppo import TransformerPPO

__all__ = [
    "AD",
    "ADEps",
    "Algorithm",
    "Amago",
    "DPT",
    "DT",
    "DTModelAgent",
    "RADT",
    "MetaDT",
    "RL2",
    "T2MIR",
    "TransformerPPO",
    "ad_loss",
    "dpt_loss",
    "dt_loss",
    "get",
    "names",
    "register_algorithm",
    "returns_to_go",
]
