"""PyTorch stand-ins for the peers' training and decoding steps (torch, optional).

Re-implemented from the peers' published shapes and step structure, not
copied: T2MIR's AD on Dark Room (a GPT-style pre-LN transformer over
interleaved state / action / reward tokens, fused scaled-dot-product
attention, its last layer's FFN replaced by a token-wise MoE (noisy top-k
gating) beside a task-wise MoE, each half the width; cross-entropy on the
action at every state token; AdamW with gradient clipping) and DPT's bandit
(GPT-2: one token per ``(s, a, r, s')`` transition after the query token,
learned positions, cross-entropy at every position).

torch (and PyYAML, for ``peer_training --t2mir``) are not dependencies of
agentrl: install them beside it, at the versions of the lock, with
``pip install -c constraints.txt torch PyYAML``. :func:`load_torch` returns
``None`` when torch is not installed so the benchmarks can skip with a clear
message. It is imported by name at run time only.
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


def _mlp(nn, d, hidden, out=None):
    return nn.Sequential(nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, out or d))


def _block_class(torch):
    """A pre-LN transformer block (fused causal SDPA) around a given FFN."""
    nn, f = torch.nn, torch.nn.functional

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

    return Block


def _moe_class(torch):
    """Top-k experts with a balance loss (squared CV of importance and load)."""
    nn, f = torch.nn, torch.nn.functional

    def cv2(x):
        return x.float().var() / (x.float().mean() ** 2 + 1e-10)

    class MoE(nn.Module):
        """Top-k experts; per-expert index gather / scatter-add dispatch."""

        def __init__(self, d, out, experts, k, hidden, noisy):
            super().__init__()
            self.k, self.noisy = k, noisy
            self.gate = _mlp(nn, d, d, experts)
            self.noise = nn.Linear(d, experts) if noisy else None
            self.experts = nn.ModuleList(
                _mlp(nn, d, hidden, out) for _ in range(experts)
            )
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

    return MoE


def _model_class(torch):
    """The stand-in model: blocks (T2MIR's MoE FFN in the last, optionally)."""
    nn = torch.nn
    Block, MoE = _block_class(torch), _moe_class(torch)

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
                    T2MIRFFN(d, 4 * d)
                    if moe and i == layers - 1
                    else _mlp(nn, d, 4 * d),
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

    return Model


def _t2mir_setup(torch, Model, kind: str, batch: int):
    """T2MIR's AD shapes: ``(model, x, target, read, balance)``."""
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
    return model, x, target, read, balance


def _dpt_setup(torch, Model, batch: int):
    """DPT's bandit shapes: ``(model, x, target, read, balance)``."""
    n, d, layers, heads, arms = 500, 32, 4, 1, 5
    tokens = n + 1
    in_dim = 1 + arms + 1 + 1  # (s, a one-hot, r, s'); bandit s is 1-d
    model = Model(d, layers, heads, tokens, in_dim, arms, False)
    x = torch.randn(batch, tokens, in_dim)
    target = torch.randint(0, arms, (batch, tokens))
    read, balance = slice(None), 0.0
    return model, x, target, read, balance


def build(torch, kind: str, batch: int, seed: int = 0):
    """``(step(), model)`` for ``kind`` in ``t2mir_dense``, ``t2mir_moe``, ``dpt``.

    ``step()`` runs one full training update on a fixed synthetic batch.
    """
    f = torch.nn.functional
    torch.manual_seed(seed)
    Model = _model_class(torch)
    if kind in ("t2mir_dense", "t2mir_moe"):
        model, x, target, read, balance = _t2mir_setup(torch, Model, kind, batch)
    elif kind == "dpt_bandit":
        model, x, target, read, balance = _dpt_setup(torch, Model, batch)
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


def _shim_t2mir_imports(torch) -> None:
    """Stand-ins for the imports T2MIR's model files need but never use here.

    ``gin.configurable`` (a decorator: identity), ``flash_attn`` (CUDA only;
    here ``flash_attn_qkvpacked_func(qkv [B, T, 3, H, Dh], causal=...)`` is
    torch's fused SDPA in float32, the same function), and the two names
    it takes from ``transformers`` (``ACT2FN``: activation name -> module;
    ``ModelOutput``: a base for its output dataclasses). Each is installed
    only when the real package is not importable.
    """
    if _missing("gin"):
        _shim_gin()
    if _missing("flash_attn"):
        _shim_flash_attn(torch)
    if _missing("transformers"):
        _shim_transformers(torch)


def _missing(name: str) -> bool:
    try:
        importlib.import_module(name)
        return False
    except ImportError:
        return True


def _shim_gin() -> None:
    import sys
    import types

    gin = types.ModuleType("gin")

    def configurable(*args, **kwargs):
        if args and callable(args[0]) and not kwargs:
            return args[0]
        return lambda fn: fn

    gin.configurable = configurable
    sys.modules["gin"] = gin


def _shim_flash_attn(torch) -> None:
    import sys
    import types

    flash = types.ModuleType("flash_attn")

    def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, causal=False, **_):
        q, k, v = qkv.float().unbind(2)  # [B, T, H, Dh] each
        q, k, v = (a.transpose(1, 2) for a in (q, k, v))
        y = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, dropout_p=dropout_p, is_causal=causal
        )
        return y.transpose(1, 2)

    flash.flash_attn_qkvpacked_func = flash_attn_qkvpacked_func
    sys.modules["flash_attn"] = flash


def _shim_transformers(torch) -> None:
    import sys
    import types

    nn = torch.nn
    acts = {"leaky_relu": nn.LeakyReLU, "relu": nn.ReLU, "gelu": nn.GELU}

    class Act2Fn(dict):
        def __getitem__(self, name):
            return acts[name]()

    class ModelOutput:
        def __getitem__(self, name):
            return getattr(self, name)

    pkg = types.ModuleType("transformers")
    activations = types.ModuleType("transformers.activations")
    activations.ACT2FN = Act2Fn(acts)
    utils = types.ModuleType("transformers.utils")
    utils.ModelOutput = ModelOutput
    pkg.activations, pkg.utils = activations, utils
    sys.modules.update(
        {
            "transformers": pkg,
            "transformers.activations": activations,
            "transformers.utils": utils,
        }
    )


def _t2mir_policy(policy_mod, args: dict, attention: str):
    """T2MIR's ``DecisionTransformerMoE`` for Dark Room from its config ``args``."""
    return policy_mod.DecisionTransformerMoE(
        state_dim=2,
        action_dim=5,
        config=args,
        action_tanh=False,
        n_layer=args["n_layer"],
        n_head=args["n_head"],
        activation_function=args["activation_function"],
        emb_pdrop=args["emb_pdrop"],
        ff_pdrop=args["ff_pdrop"],
        ff_moe_pdrop=args["ff_moe_pdrop"],
        attn_pdrop=args["attn_pdrop"],
        pos_emb=args["positional_embedding"],
        attention=attention,
        sigma_reparam=args["sigma_reparam"],
    )


def build_t2mir_real(
    torch, checkout: str, kind: str, batch: int, seed: int = 0, attention="vanilla"
):
    """``step()``: T2MIR's own AD training step, from a checkout of its code.

    ``checkout``: a clone of github.com/NJU-RL/T2MIR (kept outside this
    repository; nothing of it is copied here). Builds its
    ``DecisionTransformerMoE`` from its ``configs/args_darkroom_v0.yaml``
    (Dark Room: 2-d states, one-hot actions, 4 episodes of 100 steps =
    1,200 tokens). ``attention="vanilla"``: its CPU attention (full masked
    scores); ``"flash"``: its configured path, with ``flash_attn`` (CUDA
    only) computed by torch's fused SDPA in float32 (see
    :func:`_shim_t2mir_imports`). Runs its ``train.py`` step: forward,
    cross-entropy + balance + contrastive losses, backward, clipping, AdamW,
    LR schedule step, target-network update. ``kind="t2mir_dense"``
    empties its MoE layer list (plain FFNs of its ``ff_dim``);
    ``"t2mir_moe"`` is its config.
    """
    import sys
    from pathlib import Path

    import numpy as np
    import yaml

    root = Path(checkout) / "T2MIR-AD"
    if not (root / "algorithms" / "policy.py").is_file():
        raise FileNotFoundError(
            f"--t2mir: {checkout} is not a T2MIR checkout (no T2MIR-AD/algorithms)"
        )
    _shim_t2mir_imports(torch)
    sys.path.insert(0, str(root))
    policy_mod = importlib.import_module("algorithms.policy")
    args = yaml.safe_load((root / "configs" / "args_darkroom_v0.yaml").read_text())
    if kind == "t2mir_dense":
        args["moe_config"]["moe_layers_contrastive_and_balance"] = []
    torch.manual_seed(seed)
    policy = _t2mir_policy(policy_mod, args, attention)
    opt = torch.optim.AdamW(
        policy.parameters(), lr=args["lr"], weight_decay=args["weight_decay"]
    )
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    steps = args["train_episode_horizon"] * args["max_episode_steps"]
    rng = np.random.default_rng(seed)
    states = torch.from_numpy(rng.integers(0, 10, (batch, steps, 2))).float()
    actions = torch.nn.functional.one_hot(
        torch.from_numpy(rng.integers(0, 5, (batch, steps))), 5
    ).float()
    rewards = torch.from_numpy(rng.random((batch, steps, 1)) < 0.1).float()
    policy.train()

    def step():
        pred, balance, contrastive = policy(states, actions, rewards)
        loss = torch.nn.functional.cross_entropy(
            pred.reshape(-1, 5), actions.reshape(-1, 5)
        )
        loss = loss + balance + contrastive
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), args["max_grad_norm"])
        opt.step()
        sched.step()
        if hasattr(policy, "update_target_network"):
            policy.update_target_network()
        return float(loss.item())

    return step
