"""Decision-Pretrained Transformer (Lee et al., 2023).

DPT predicts the optimal action for a query state from an in-context set of
transitions ``(s, a, r, s')`` collected by some roll-in policy. As in the
reference implementation the model predicts from every prefix of the context
(position 0 sees only the query, position i the first i transitions), and the
cross-entropy against the oracle's label is averaged over positions 1..N:
the reference's training pass returns ``preds[:, 1:]`` (``net.py``), so the
query-only position is never trained (until session 50 it was, at weight
1 / (N + 1)); acting with an empty context reads it, as the reference's
first bandit pull does.

In context it acts on a set of its own past transitions (the last
``context_size``): after every step on bandits (the paper's bandit
protocol, decoded with a KV cache), after every episode elsewhere (its Dark
Room protocol: the current episode is not in context); see
:class:`agentrl.agents.context_set.DPTModelAgent`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp

from agentrl.agents.acting import acting_agent
from agentrl.agents.driver import make_model_agent
from agentrl.agents.model_agents import split_model
from agentrl.algos.ad import check_positive
from agentrl.algos.base import Algorithm, check, register_algorithm
from agentrl.algos.losses import action_loss
from agentrl.data.samplers import QUERY_CHOICES, DPTSampler

CONTEXT_UPDATES = ("auto", "step", "episode")


def dpt_loss(model: Any, batch: dict[str, jax.Array], *, deterministic: bool = False):
    """Optimal-action loss for the query from every context prefix.

    Args:
      batch: ``query_obs [B, ...]``, ``context_obs [B, N, ...]``,
        ``context_action``, ``context_reward [B, N]``, ``context_next_obs``,
        ``label [B, ...]`` (the oracle's action in the query state).

    Returns:
      ``(loss, metrics, output)``; output action ``[B, N + 1, A]``.
    """
    out = model.predict_query(
        batch["query_obs"],
        batch["context_obs"],
        batch["context_action"],
        batch["context_reward"],
        batch["context_next_obs"],
        deterministic=deterministic,
    )
    positions = out.action.shape[1]
    label = batch["label"]
    target = jnp.broadcast_to(
        jnp.expand_dims(label, 1), (label.shape[0], positions, *label.shape[1:])
    )
    # position 0 sees the query alone: the reference leaves it out of the loss
    trained = jnp.broadcast_to(jnp.arange(positions) >= 1, target.shape[:2])
    loss, metrics = action_loss(model.config.head, out, target, trained)
    # Accuracy with the full context: the number DPT is judged by.
    if model.config.head == "categorical":
        last = jnp.argmax(out.action[:, -1], -1) == label
        metrics["accuracy_full_context"] = jnp.mean(last.astype(jnp.float32))
    return loss, metrics, out


@register_algorithm
@dataclasses.dataclass(frozen=True)
class DPT(Algorithm):
    """Decision-Pretrained Transformer.

    Attributes:
      context_size: transitions in the in-context set (training and acting);
        the model's window (``model.max_steps``, when unset) is one more,
        for the query.
      context_update: when the acting agent adds its own transitions to its
        context: ``"step"``, ``"episode"``, or ``"auto"`` (step on bandits,
        episode elsewhere).
      query: where a training query step comes from: ``"history"`` (any
        step of the context's history) or ``"beyond_context"`` (a step of
        it outside the context: on the uniform roll-in's independent
        transitions, a state drawn independently of the context, as the
        reference's; :class:`~agentrl.data.samplers.DPTSampler`).
    """

    name = "dpt"
    description = "Decision-Pretrained Transformer: optimal action from a context"
    token_layouts = ("transition",)
    #: the query leads the sequence (T2MIR leaves it out of its task contrast)
    query_tokens: ClassVar[int] = 1

    context_size: int = 20
    context_update: str = "auto"
    query: str = "history"

    def __post_init__(self):
        check_positive("algo", context_size=self.context_size)
        check(
            self.context_update in CONTEXT_UPDATES,
            f"algo.context_update must be one of {CONTEXT_UPDATES}, "
            f"got {self.context_update!r}",
        )
        check(
            self.query in QUERY_CHOICES,
            f"algo.query must be one of {QUERY_CHOICES}, got {self.query!r}",
        )

    def context_steps(self, env: Any) -> int:
        return self.context_size + 1

    def make_sampler(self, dataset: Any, train: Any, *, paired: bool = False) -> Any:
        return DPTSampler(
            dataset,
            train.batch_size,
            self.context_size,
            seed=train.seed,
            paired=paired,
            query=self.query,
        )

    def loss(self, model, batch, aux, hparams, *, env, deterministic=False):
        return dpt_loss(model, batch, deterministic=deterministic)

    def make_agent(self, model: Any, env: Any, num_steps: int, config: Any) -> Any:
        model = split_model(model)  # one handle for the acting rule's agents
        return acting_agent(
            lambda greedy: make_model_agent(
                model,
                env,
                num_steps,
                protocol="query",
                greedy=greedy,
                temperature=config.eval.temperature,
                context_size=self.context_size,
                context_update=self.context_update,
            ),
            config.eval.acting,
        )
