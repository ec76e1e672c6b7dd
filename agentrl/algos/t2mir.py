"""T2MIR (Mixture-of-Experts meets In-Context RL, NeurIPS 2025): a wrapper.

T2MIR wraps a base in-context learner (AD or DPT, as in its paper) without
copying it: the base keeps its windows, loss and acting; T2MIR asks for a
model whose last layer's FFN is a token-wise MoE in parallel with a
task-wise MoE (see :mod:`agentrl.models`), draws the base's batches as
``B/2`` tasks x 2 segments, and adds two losses to the base's:

- the token-wise load-balancing loss ``balance_weight * (CV^2(importance) +
  CV^2(load))`` (the model's ``aux["balance_loss"]``, unweighted);
- a contrastive InfoNCE loss on the task router, weighted by
  ``contrastive_weight``: the online router's logits (or, with
  ``contrast_softmax``, their softmax: T2MIR's ``add_softmax``, set per
  experiment as its config) averaged over the sequence's tokens are the
  queries (DPT's query token left out, as in the reference: it carries no
  information about the task), an EMA copy of the router (rate ``ema_tau``
  per step; the auxiliary training state) gives the keys the same way,
  similarity is bilinear ``q W k^T``, and each pair's first segment is
  scored against the batch's second segments (and the reverse), the
  positive the other segment of its task: a segment of a *different*
  history of the task wherever the data hold several
  (:func:`agentrl.data.samplers.pair_rows`), so a paired batch sees as many
  distinct histories as the base algorithm's unpaired one
  (:func:`agentrl.models.contrastive.contrastive_loss`).

The three weights are traced, so a sweep over them is one program.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from agentrl.algos.ad import AD
from agentrl.algos.base import Algorithm, check, register_algorithm
from agentrl.algos.dpt import DPT
from agentrl.configtools import traced
from agentrl.models.contrastive import (
    contrastive_loss,
    ema_update,
    router_features,
    task_router_logits,
)


def init_ema_router(model: Any) -> nnx.State:
    """A copy of the task router's params: the EMA target's initial value."""
    # A real copy: the EMA must not share buffers with the (donated) params.
    return jax.tree.map(jnp.copy, nnx.state(model.task_router, nnx.Param))


def update_ema_router(ema: Any, model: Any, tau: Any) -> Any:
    return ema_update(ema, nnx.state(model.task_router, nnx.Param), tau)


def t2mir_terms(
    model: Any,
    out: Any,
    batch: dict,
    ema_router: Any,
    skip: int = 0,
    softmax: bool = False,
) -> tuple[jax.Array, jax.Array]:
    """``(balance, contrastive)`` unweighted losses of one batch's output.

    ``skip``: leading tokens left out of the contrastive average (DPT's
    query token); ``softmax``: contrast the router's softmax probabilities
    instead of its logits (``T2MIR.contrast_softmax``).
    """
    router_in = out.aux["task_router_input"][:, skip:]  # [B, T - skip, d]
    online = nnx.state(model.task_router, nnx.Param)
    query = router_features(online, router_in, softmax)  # [B, E]
    keys = task_router_logits(ema_router, router_in, softmax)  # [B, E]
    contrast = contrastive_loss(query, keys, model.contrastive_w, batch["task_id"])
    return out.aux["balance_loss"], contrast


@register_algorithm
@dataclasses.dataclass(frozen=True)
class T2MIR(Algorithm):
    """T2MIR over a base algorithm (AD or DPT).

    Attributes:
      base: the wrapped in-context learner (its fields are ``algo.base.*``).
      balance_weight: weight of the token-wise load-balancing loss.
      contrastive_weight: weight of the task router's contrastive loss.
      ema_tau: EMA rate of the router copy that gives the contrastive keys.
      contrast_softmax: contrast the task router's softmax probabilities
        (averaged over tokens) instead of its logits: T2MIR's ``add_softmax``
        (``True`` in its Dark Room, HalfCheetahVel-v0 and Walker AD configs,
        ``False`` in the others).
    """

    name = "t2mir"
    description = "T2MIR: token- and task-wise MoE around AD or DPT"
    needs_moe = True

    base: Algorithm = AD()
    balance_weight: float = traced(0.1)
    contrastive_weight: float = traced(0.01)
    ema_tau: float = traced(0.005)
    contrast_softmax: bool = False

    def __post_init__(self):
        check(
            isinstance(self.base, Algorithm) and not isinstance(self.base, T2MIR),
            f"algo.base must be a (non-T2MIR) algorithm, got {self.base!r}",
        )
        for name in ("balance_weight", "contrastive_weight"):
            v = getattr(self, name)
            check(v >= 0, f"algo.{name} must be >= 0, got {v}")
        check(
            0 < self.ema_tau <= 1, f"algo.ema_tau must be in (0, 1], got {self.ema_tau}"
        )
        check(
            isinstance(self.contrast_softmax, bool),
            "algo.contrast_softmax must be true or false, got "
            f"{self.contrast_softmax!r}",
        )

    @property
    def label(self) -> str:
        return f"{self.name}_{self.base.label}"

    def check(self, config: Any) -> None:
        super().check(config)
        if isinstance(self.base, AD):  # the base's data checks (not its MoE one)
            self.base.check(config, prefix="algo.base")
        check(
            config.train.batch_size % 2 == 0,
            "train.batch_size must be even for T2MIR (pairs of segments), "
            f"got {config.train.batch_size}",
        )

    def check_layout(self, model_config: Any) -> None:
        self.base.check_layout(model_config)

    def complete_model(self, model_config: Any, env: Any) -> Any:
        return self.base.complete_model(model_config, env)

    def context_steps(self, env: Any) -> int:
        return self.base.context_steps(env)

    def resolve(self, env: Any, dataset: Any | None) -> T2MIR:
        return dataclasses.replace(self, base=self.base.resolve(env, dataset))

    def make_sampler(self, dataset: Any, train: Any, *, paired: bool = True) -> Any:
        # Two segments of each task side by side: the contrastive positives.
        return self.base.make_sampler(dataset, train, paired=True)

    def loss(self, model, batch, aux, hparams, *, env, deterministic=False):
        base, metrics, out = self.base.loss(
            model,
            batch,
            None,
            hparams["base"],
            env=env,
            deterministic=deterministic,
        )
        skip = getattr(self.base, "query_tokens", 0)
        balance, contrast = t2mir_terms(
            model, out, batch, aux, skip, self.contrast_softmax
        )
        loss = (
            base
            + hparams["balance_weight"] * balance
            + hparams["contrastive_weight"] * contrast
        )
        metrics = {
            **metrics,
            "base_loss": base,
            "balance_loss": balance,
            "contrastive_loss": contrast,
        }
        return loss, metrics, out

    def init_aux(self, model: Any) -> Any:
        return init_ema_router(model)

    def update_aux(self, aux: Any, model: Any, hparams: dict[str, Any]) -> Any:
        tau = hparams["ema_tau"]
        return update_ema_router(aux, model, tau)

    def make_agent(self, model: Any, env: Any, num_steps: int, config: Any) -> Any:
        return self.base.make_agent(model, env, num_steps, config)


register_algorithm("t2mir_ad", lambda: T2MIR(base=AD()))
register_algorithm("t2mir_dpt", lambda: T2MIR(base=DPT()))
