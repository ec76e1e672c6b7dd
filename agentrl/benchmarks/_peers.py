"""PyTorch stand-ins for the peers' training and decoding steps (optional extra).

Re-implemented from the peers' published shapes and step structure, not
copied: T2MIR's AD on Dark Room (a GPT-style pre-LN transformer over
interleaved state / action / reward tokens, fused scaled-dot-product
attention, its last layer's FFN replaced by a token-wise MoE (noisy top-k
gating) beside a task-wise MoE, each half the width; cross-entropy on the
action at every state token; AdamW with gradient clipping) and DPT's bandit
(GPT-2: one token per ``(s, a, r, s')`` transition after the query token,
learned positions, cross-entropy at every position).

torch comes from the ``peers`` extra (``pip install agentrl[peers]``);
:func:`load_torch` returns ``None`` when it is not installed so the
benchmarks can skip with a clear message. It is imported by name at run time
only, so nothing else in the package depends on it.
"""

from __future__ import annotations

import importlib
import time
from typing import Any


def load_torch() -> Any | None:
    """The ``torch`` module with 2 intra-op threads, or ``None`` if absent."""
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return None
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    return torch


def build(torch, kind: str, batch: int, seed: int = 0):
    """``(step(), model)`` for ``kind`` in ``t2mir_dense``, ``t2mir_moe``, ``dpt``.

    ``step()`` runs one full training update on a fixed synthetic batch.
    """
    nn, f = torch.nn, torch.nn.functional
    torch.manual_seed(seed)

    class Block(nn.Module):
        def __init__(self, d, heads, ffn):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.ffn = ffn

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
            q, k, v = (
                a.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                for a in (q, k, v)
            )
            y = f.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
            out = self.ffn(self.ln2(x))
            aux = 0.0
            if isinstance(out, tuple):
                out, aux = out
            return x + out, aux

    def mlp(d, hidden, out=None):
        return nn.Sequential(
            nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, out or d)
        )

    def cv2(x):
        return x.float().var() / (x.float().mean() ** 2 + 1e-10)

    class MoE(nn.Module):
        """Top-k experts; per-expert index gather / scatter-add dispatch."""

        def __init__(self, d, out, experts, k, hidden, noisy):
            super().__init__()
            self.k, self.noisy = k, noisy
            self.gate = mlp(d, d, experts)
            self.noise = nn.Linear(d, experts) if noisy else None
            self.experts = nn.ModuleList(mlp(d, hidden, out) for _ in range(experts))
            self.out = out

        def forward(self, x):
            logits = self.gate(x)
            if self.noisy and self.training:
                scale = f.softplus(self.noise(x))
                logits = logits + torch.randn_like(logits) * scale
            top, idx = logits.topk(self.k, dim=-1)
            w = torch.softmax(top, dim=-1)
            gates = torch.zeros_like(logits).scatter(-1, idx, w)
            y = x.new_zeros(x.shape[0], self.out)
            for e, expert in enumerate(self.experts):
                rows = (gates[:, e] > 0).nonzero(as_tuple=True)[0]
                if rows.numel():
                    contrib = expert(x[rows]) * gates[rows, e : e + 1]
                    y = y.index_add(0, rows, contrib)
            importance, load = gates.sum(0), (gates > 0).float().sum(0)
            return y, cv2(importance) + cv2(load)

    class T2MIRFFN(nn.Module):
        def __init__(self, d, d_ff):
            super().__init__()
            self.token = MoE(d, d // 2, 6, 2, d_ff // 2, noisy=True)
            self.task = MoE(d, d // 2, 12, 2, d_ff // 2, noisy=False)

        def forward(self, h):
            shape = h.shape
            flat = h.reshape(-1, shape[-1])
            a, la = self.token(flat)
            b, lb = self.task(flat)
            return torch.cat([a, b], -1).reshape(shape), la + lb

    class Model(nn.Module):
        def __init__(self, d, layers, heads, tokens, in_dim, actions, moe):
            super().__init__()
            self.pos = nn.Parameter(torch.zeros(1, tokens, d))
            self.embed = nn.Linear(in_dim, d)
            self.blocks = nn.ModuleList(
                Block(
                    d,
                    heads,
                    T2MIRFFN(d, 4 * d) if moe and i == layers - 1 else mlp(d, 4 * d),
                )
                for i in range(layers)
            )
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, actions)

        def forward(self, x):
            h = self.embed(x) + self.pos[:, : x.shape[1]]
            aux = 0.0
            for block in self.blocks:
                h, a = block(h)
                aux = aux + a
            return self.head(self.ln(h)), aux

    if kind in ("t2mir_dense", "t2mir_moe"):
        steps, d, layers, heads, obs_n, act_n = 400, 64, 4, 8, 100, 5
        tokens = 3 * steps
        # s / a / r tokens: one-hot state, one-hot action, scalar reward, each
        # with its own type bit; one Linear embeds all (T2MIR embeds each
        # kind with its own Linear: the same FLOPs)
        in_dim = obs_n + act_n + 1 + 3
        model = Model(d, layers, heads, tokens, in_dim, act_n, kind == "t2mir_moe")
        x = torch.zeros(batch, tokens, in_dim)
        obs = torch.randint(0, obs_n, (batch, steps))
        act = torch.randint(0, act_n, (batch, steps))
        x[:, 0::3].scatter_(-1, obs[..., None], 1.0)
        x[:, 1::3].scatter_(-1, obs_n + act[..., None], 1.0)
        x[:, 2::3, obs_n + act_n] = (torch.rand(batch, steps) < 0.1).float()
        for i in range(3):
            x[:, i::3, -3 + i] = 1.0
        target, read = act, slice(0, None, 3)
        balance = 0.1
    elif kind == "dpt_bandit":
        n, d, layers, heads, arms = 500, 32, 4, 1, 5
        tokens = n + 1
        in_dim = 1 + arms + 1 + 1  # (s, a one-hot, r, s'); bandit s is 1-d
        model = Model(d, layers, heads, tokens, in_dim, arms, False)
        x = torch.randn(batch, tokens, in_dim)
        target = torch.randint(0, arms, (batch, tokens))
        read, balance = slice(None), 0.0
    else:
        raise ValueError(f"unknown peer kind {kind!r}")
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=1e-4)
    model.train()

    def step():
        logits, aux = model(x)
        logits = logits[:, read]
        loss = f.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))
        loss = loss + balance * aux
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    return step, model


def time_call(fn, repeats: int) -> float:
    """Best wall seconds of ``fn()`` over ``repeats`` calls after one warm-up."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best
