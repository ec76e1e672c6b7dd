"""T2MIR mixture-of-experts feed-forward: token-wise and task-wise MoE in parallel.

- Router: gate logits ``Linear(d, E) -> tanh -> Linear(E, E)``, no biases
  (T2MIR's ``gate_network="mlp"``: hidden width the number of experts
  ``E``); optional noisy gating
  (Shazeer et al. 2017): ``noisy = clean + N(0, 1) * (softplus(x W_noise) +
  1e-2)`` in training only; top-k of the (noisy) logits, softmax over those k.
- Load balancing (token-wise MoE): ``CV^2(importance) + CV^2(load)`` with
  importance = summed gates per expert and load = expected number of tokens
  per expert (the smooth normal-CDF estimator when noisy, else the count);
  ``CV^2`` uses the unbiased variance (``ddof=1``, torch's ``var()`` in
  T2MIR's code). The estimator asks whether an expert is in the top-k of
  the *noisy* logits, as Shazeer et al.; T2MIR's code compares the noise
  term alone with the threshold (docs/fidelity.md, item 15).
- Experts: ``E`` independent FFNs ``d -> h -> d_out`` (the model's
  ``ffn_activation``, GPT-2's GELU by default). Dispatch is
  "blocked" (the default: token-expert pairs sorted by expert into blocks of
  one expert each, MegaBlocks-style, one batched matmul over the blocks:
  top-k FLOPs plus at most ``E (bs - 1)`` padding rows), "sorted" (sort,
  gather, ``jax.lax.ragged_dot``, scatter-add back; on CPU ``ragged_dot``
  costs about E times the top-k work) or "dense" (all experts on all tokens,
  weighted by gates that are zero outside the top-k). No capacity, no dropped
  token: all three are exact; ``agentrl bench model_throughput`` compares them.
- :class:`T2MIRFeedForward`: token MoE (``d -> d/2``) and task MoE
  (``d -> d/2``) side by side, outputs concatenated to ``d``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from agentrl.models.activations import FFN_ACTIVATIONS
from agentrl.models.precision import mixed_einsum

NOISE_EPS = 1e-2
F32 = jnp.float32


def _value(v):
    return v[...] if isinstance(v, nnx.Variable) else v


def router_logits(params, x: jax.Array) -> jax.Array:
    """Clean gate logits ``[..., E]`` from router params (mapping with
    ``w1 [d, E], w2 [E, E]``: a :class:`Router`'s
    ``nnx.state(router, nnx.Param)``, or a dict of arrays) and ``x [..., d]``."""
    w1, w2 = (_value(params[k]) for k in ("w1", "w2"))
    return jnp.tanh(x @ w1) @ w2


def top_k_gates(logits: jax.Array, k: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Softmax over the top-k logits.

    ``logits [N, E]`` -> ``gates [N, E]`` (zero outside the top-k, rows sum to
    one), ``idx [N, k]`` (chosen experts, largest first), ``w [N, k]``.
    """
    vals, idx = jax.lax.top_k(logits, k)
    w = jax.nn.softmax(vals, axis=-1)
    gates = jnp.zeros_like(logits).at[jnp.arange(logits.shape[0])[:, None], idx].set(w)
    return gates, idx, w


def cv_squared(x: jax.Array) -> jax.Array:
    """Squared coefficient of variation ``var / mean^2`` of ``x [E]`` (0 for
    one entry), with the unbiased variance (``ddof=1``) as T2MIR's code."""
    if x.shape[-1] <= 1:
        return jnp.zeros((), x.dtype)
    return jnp.var(x, ddof=1) / (jnp.mean(x) ** 2 + 1e-10)


def balance_loss(gates: jax.Array, load: jax.Array) -> jax.Array:
    """Unweighted ``CV^2(importance) + CV^2(load)``; ``gates [N, E]``, ``load [E]``."""
    return cv_squared(gates.sum(0)) + cv_squared(load)


def _prob_in_top_k(clean, noisy, std, k):
    """Probability that each expert stays in the top-k under fresh noise.

    ``clean, noisy, std [N, E]`` -> ``[N, E]``. An expert is "in" when its
    noisy logit beats the (k+1)-th noisy logit (Shazeer et al. 2017).
    """
    top = jax.lax.top_k(noisy, k + 1)[0]
    thr_in = top[:, k : k + 1]  # the (k+1)-th value: bar to stay in
    thr_out = top[:, k - 1 : k]  # the k-th value: bar to get in
    is_in = noisy > thr_in
    p_in = jax.scipy.stats.norm.cdf((clean - thr_in) / std)
    p_out = jax.scipy.stats.norm.cdf((clean - thr_out) / std)
    return jnp.where(is_in, p_in, p_out)


def _block_rows(pairs: int, num_experts: int) -> int:
    """Rows per block of :meth:`Experts.blocked`: a power of two near the mean
    group size ``pairs / E``, 8 to 256 (padding ``<= E (bs - 1)`` rows stays
    small next to ``pairs``; 256 rows fill a matmul on CPU and GPU alike)."""
    mean = max(1, pairs // num_experts)
    return int(min(256, max(8, 1 << (mean - 1).bit_length())))


class Router(nnx.Module):
    """Gate ``Linear(d, E) -> tanh -> Linear(E, E)`` (no biases, as T2MIR's
    ``gate_network="mlp"``) with optional learned noise."""

    def __init__(self, d_in: int, num_experts: int, noisy: bool, *, rngs):
        init = nnx.initializers.lecun_normal()
        self.w1 = nnx.Param(init(rngs.params(), (d_in, num_experts)))
        self.w2 = nnx.Param(init(rngs.params(), (num_experts, num_experts)))
        self.noisy = noisy
        if noisy:
            self.w_noise = nnx.Param(jnp.zeros((d_in, num_experts)))
            self.noise_rng = rngs["noise"].fork()

    def __call__(self, x: jax.Array) -> jax.Array:
        """Clean logits ``[..., E]`` for ``x [..., d]``."""
        return router_logits({"w1": self.w1, "w2": self.w2}, x)

    def route(self, x: jax.Array, k: int, deterministic: bool):
        """``x [N, d]`` -> ``(gates [N,E], idx [N,k], w [N,k], load [E], logits)``."""
        clean = self(x)
        if self.noisy and not deterministic:
            std = jax.nn.softplus(x @ self.w_noise[...]) + NOISE_EPS
            noisy = clean + jax.random.normal(self.noise_rng(), clean.shape) * std
            gates, idx, w = top_k_gates(noisy, k)
            if k < clean.shape[-1]:
                load = _prob_in_top_k(clean, noisy, std, k).sum(0)
            else:
                load = (gates > 0).sum(0).astype(clean.dtype)
        else:
            gates, idx, w = top_k_gates(clean, k)
            load = (gates > 0).sum(0).astype(clean.dtype)
        return gates, idx, w, load, clean


class Experts(nnx.Module):
    """``E`` feed-forward experts ``d_in -> hidden -> d_out``, ``activation``
    between (a name in :data:`~agentrl.models.activations.FFN_ACTIVATIONS`)."""

    def __init__(
        self,
        num_experts: int,
        d_in: int,
        hidden: int,
        d_out: int,
        *,
        rngs,
        dtype=F32,
        activation: str = "gelu_tanh",
    ):
        self.dtype = dtype  # matmul operands (float32 accumulation and output)
        self.activation = activation
        init = nnx.initializers.lecun_normal(in_axis=-2, out_axis=-1, batch_axis=0)
        self.w1 = nnx.Param(init(rngs.params(), (num_experts, d_in, hidden)))
        self.b1 = nnx.Param(jnp.zeros((num_experts, hidden)))
        self.w2 = nnx.Param(init(rngs.params(), (num_experts, hidden, d_out)))
        self.b2 = nnx.Param(jnp.zeros((num_experts, d_out)))

    def _act(self, h: jax.Array) -> jax.Array:
        return FFN_ACTIVATIONS[self.activation](h)

    def dense(self, x: jax.Array, gates: jax.Array) -> jax.Array:
        """Every expert on every token: ``x [N, d]``, ``gates [N, E]`` -> ``[N, o]``."""
        c = self.dtype
        w1, w2 = self.w1[...].astype(c), self.w2[...].astype(c)
        h = mixed_einsum("nd,edh->neh", x.astype(c), w1)
        h = self._act(h + self.b1[...]).astype(c)
        y = mixed_einsum("neh,eho->neo", h, w2)
        return jnp.einsum("ne,neo->no", gates, y + self.b2[...])

    def blocked(self, x: jax.Array, idx: jax.Array, w: jax.Array) -> jax.Array:
        """Top-k only, as blocks of one expert each: ``x [N, d]``, ``idx, w [N, k]``.

        MegaBlocks' layout in plain ``lax``: token-expert pairs sorted by
        expert, each expert's group padded to a multiple of ``bs`` rows, so
        every block of ``bs`` rows belongs to one expert; one batched matmul
        ``[blocks, bs, d] x [blocks, d, h]`` (the block's expert weights
        gathered) then runs all experts at once. Padding is at most
        ``E (bs - 1)`` rows (a static bound: ``N k / bs + E`` blocks). No
        token is dropped; equal to :meth:`sorted` and :meth:`dense` to float
        rounding.
        """
        n, k = idx.shape
        num_experts = self.w1[...].shape[0]
        bs = _block_rows(n * k, num_experts)
        flat = idx.reshape(-1)
        order = jnp.argsort(flat, stable=True)
        tok, expert = order // k, flat[order]
        sizes = jnp.bincount(flat, length=num_experts)
        padded = (sizes + bs - 1) // bs * bs
        start, pstart = jnp.cumsum(sizes) - sizes, jnp.cumsum(padded) - padded
        blocks = (n * k) // bs + num_experts  # static upper bound
        rows = blocks * bs
        dest = pstart[expert] + jnp.arange(n * k) - start[expert]
        row_tok = jnp.zeros((rows,), jnp.int32).at[dest].set(tok)
        row_w = jnp.zeros((rows,), w.dtype).at[dest].set(w.reshape(-1)[order])
        block_expert = jnp.searchsorted(
            jnp.cumsum(padded), jnp.arange(blocks) * bs, side="right"
        )
        block_expert = jnp.minimum(block_expert, num_experts - 1)
        c = self.dtype
        # padded rows compute on token 0 and are weighted by zero: no effect
        # on the output or any gradient
        xs = x.astype(c)[row_tok].reshape(blocks, bs, -1)
        w1 = self.w1[...].astype(c)[block_expert]
        w2 = self.w2[...].astype(c)[block_expert]
        h = mixed_einsum("bnd,bdh->bnh", xs, w1)
        h = self._act(h + self.b1[...][block_expert][:, None]).astype(c)
        y = mixed_einsum("bnh,bho->bno", h, w2)
        y = (y + self.b2[...][block_expert][:, None]).reshape(rows, -1)
        y = y * row_w[:, None]
        return jnp.zeros((n, y.shape[-1]), y.dtype).at[row_tok].add(y)

    def sorted(self, x: jax.Array, idx: jax.Array, w: jax.Array) -> jax.Array:
        """Top-k only: ``x [N, d]``, ``idx, w [N, k]`` -> ``[N, o]`` (ragged_dot)."""
        n, k = idx.shape
        num_experts = self.w1[...].shape[0]
        flat = idx.reshape(-1)
        order = jnp.argsort(flat, stable=True)
        tok = order // k
        expert = flat[order]
        sizes = jnp.bincount(flat, length=num_experts).astype(jnp.int32)
        c = self.dtype
        w1, w2 = self.w1[...].astype(c), self.w2[...].astype(c)
        xs = x.astype(c)[tok]
        h = jax.lax.ragged_dot(xs, w1, sizes, preferred_element_type=F32)
        h = self._act(h + self.b1[...][expert]).astype(c)
        y = jax.lax.ragged_dot(h, w2, sizes, preferred_element_type=F32)
        y = (y + self.b2[...][expert]) * w.reshape(-1)[order][:, None]
        return jnp.zeros((n, y.shape[-1]), y.dtype).at[tok].add(y)


class MoE(nnx.Module):
    """One routed mixture ``d -> d_out`` (router + experts)."""

    def __init__(
        self,
        d_in: int,
        d_out: int,
        hidden: int,
        num_experts: int,
        top_k: int,
        noisy: bool,
        dispatch: str,
        *,
        rngs,
        dtype=F32,
        activation: str = "gelu_tanh",
    ):
        self.top_k = top_k
        self.dispatch = dispatch
        self.router = Router(d_in, num_experts, noisy, rngs=rngs)
        self.experts = Experts(
            num_experts,
            d_in,
            hidden,
            d_out,
            rngs=rngs,
            dtype=dtype,
            activation=activation,
        )

    def __call__(self, x: jax.Array, route_in: jax.Array, deterministic: bool):
        """``x, route_in [N, d]`` -> ``(y [N, o], gates [N, E], load [E], logits)``."""
        gates, idx, w, load, logits = self.router.route(
            route_in, self.top_k, deterministic
        )
        if self.dispatch == "dense":
            y = self.experts.dense(x, gates)
        elif self.dispatch == "blocked":
            y = self.experts.blocked(x, idx, w)
        else:
            y = self.experts.sorted(x, idx, w)
        return y, gates, load, logits


class T2MIRFeedForward(nnx.Module):
    """Token-wise MoE and task-wise MoE in parallel, each half the width."""

    def __init__(self, config, *, rngs):
        c = config
        half = c.d_model // 2
        common = dict(
            d_in=c.d_model,
            d_out=half,
            hidden=c.expert_hidden,
            dtype=jnp.dtype(c.compute_dtype),
            activation=c.ffn_activation,
        )
        self.token_moe = MoE(
            **common,
            num_experts=c.token_experts,
            top_k=c.token_top_k,
            noisy=c.token_noise,
            dispatch=c.moe_dispatch,
            rngs=rngs,
        )
        self.task_moe = MoE(
            **common,
            num_experts=c.task_experts,
            top_k=c.task_top_k,
            noisy=False,
            dispatch=c.moe_dispatch,
            rngs=rngs,
        )

    def __call__(self, h: jax.Array, task_in: jax.Array, deterministic: bool):
        """``h [B, T, d]`` (FFN input), ``task_in [B, T, d]`` (task-router input).

        Returns ``(y [B, T, d], aux)``; aux: ``balance_loss`` (unweighted,
        token MoE), ``task_router_logits [B, E]`` (mean over T),
        ``task_router_input [B, T, d]``, ``token_gates [B, T, E_tok]``,
        ``task_gates [B, T, E_task]``.
        """
        b, t, d = h.shape
        flat = h.reshape(b * t, d)
        y_tok, g_tok, load, _ = self.token_moe(flat, flat, deterministic)
        y_task, g_task, _, logits = self.task_moe(flat, task_in.reshape(b * t, d), True)
        y = jnp.concatenate([y_tok, y_task], axis=-1).reshape(b, t, d)
        aux = {
            "balance_loss": balance_loss(g_tok, load),
            "task_router_logits": logits.reshape(b, t, -1).mean(1),
            "task_router_input": task_in,
            "token_gates": g_tok.reshape(b, t, -1),
            "task_gates": g_task.reshape(b, t, -1),
        }
        return y, aux
