"""Static configuration of a decision model (frozen dataclass, validated early).

Positional scheme (``positions="token"``, the default): rotary embeddings
(RoPE) on queries and keys, indexed by token position, plus a *sliding
attention window* of ``max_steps`` steps (``max_steps * tokens_per_step``
tokens). Attention then depends only on relative distances inside the
window, so

- the full forward pass over a sequence longer than ``max_steps`` and the
  rolling KV cache (oldest steps drop out) compute exactly the same thing;
- an AD evaluation that rolls a window over hundreds of episodes never shows
  the model a relative distance it did not see in training (a window equal to
  the training context), unlike learned absolute positions, which would need
  re-basing and break cached/uncached equality.

Cached keys are stored already rotated at their absolute token position;
angles are ``position * inv_freq`` in float32 (angle error ~1e-3 rad after
1e5 tokens: harmless, and identical in the cached and uncached paths).

``positions="episode"`` is ReLIC's scheme for sequences of whole episodes of
``episode_steps`` steps (see the field); the window still counts tokens.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

from agentrl.checks import is_int, is_number
from agentrl.models.activations import FFN_ACTIVATIONS

OBS_KINDS = ("discrete", "continuous")
OBS_ENCODINGS = ("table", "grid")
ACTION_KINDS = ("discrete", "continuous")
TOKEN_LAYOUTS = ("step", "sar", "transition")
HEADS = ("categorical", "gaussian", "mse")
TASK_ROUTINGS = ("token", "sequence")
MOE_DISPATCHES = ("blocked", "sorted", "dense")
ATTENTIONS = ("blockwise", "reference")
COMPUTE_DTYPES = ("float32", "bfloat16")
POSITIONS = ("token", "episode")

TOKENS_PER_STEP = {"step": 1, "sar": 3, "transition": 1}


def _choice(name: str, value, allowed: tuple) -> None:
    if value not in allowed:
        raise ValueError(f"ModelConfig.{name} must be one of {allowed}, got {value!r}")


def _positive(name: str, value, minimum: int = 1) -> None:
    if not is_int(value, minimum):
        raise ValueError(
            f"ModelConfig.{name} must be an int >= {minimum}, got {value!r}"
        )


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Everything that sets the shapes of a :class:`DecisionModel`.

    Attributes:
      obs_kind: ``"discrete"`` (scalar int32 in ``[0, obs_size)``) or
        ``"continuous"`` (float vector ``[obs_size]``).
      obs_size: number of observation categories, or vector dimension.
      obs_encoding: how a discrete observation is embedded. ``"table"``: one
        learned vector per id. ``"grid"``: the id is a grid cell
        ``layer * grid_size**2 + y * grid_size + x`` (Dark Room, Key-to-Door:
        ``layer`` is e.g. has-key) embedded as ``E_x[x] + E_y[y] +
        W (x, y) / grid_size + E_layer[layer]``. A goal cell never rewarded in
        training then shares its row, column and coordinates with trained
        ones, which is what lets AD/DPT generalise to held-out goals.
      grid_size: side of the grid for ``obs_encoding="grid"`` (filled from
        the environment's ``size`` by ``complete_model_config``).
      action_kind: ``"discrete"`` or ``"continuous"``.
      action_size: number of actions, or action dimension.
      num_layers, num_heads, d_model, d_ff: transformer shape (pre-norm).
      ffn_activation: the nonlinearity of every feed-forward layer, the MoE
        experts' included: ``"gelu_tanh"`` (GPT-2's, the default),
        ``"gelu"`` (exact), ``"relu"`` or ``"leaky_relu"`` (slope 0.01); which
        reference uses which: :mod:`agentrl.models.activations`.
      normformer: NormFormer's block (Shleifer et al. 2021; AMAGO's and
        T2MIR-AD's ``TransformerLayer``): a learned scale per attention head
        on its output before the output projection (``head_scaling``, ones
        at init), a LayerNorm on the attention's output before it joins the
        residual stream, and one on the dense FFN's hidden units after the
        activation (an MoE layer has the first two: T2MIR's experts have no
        norm inside). Off by default (no parameters then).
      dropout: residual and embedding dropout rate (training only), for
        each of the two sites its own field leaves unset.
      embedding_dropout: dropout rate on the input tokens (after the
        embedding, before the first block); ``None``: ``dropout``.
      residual_dropout: dropout rate on each block's attention and FFN
        outputs before they join the residual stream; ``None``: ``dropout``.
      attention_dropout: dropout rate on the attention weights (after the
        softmax, the sink's weight included), training's full passes only;
        both ``attention`` paths drop the same weights for the same key
        (:mod:`agentrl.models.attention`). 0: none, and no RNG stream for it
        (the model's state is the one it had before the setting existed).
        Decoding and prefill never drop.
      max_steps: attention window in *steps* (also the default cache size);
        ``None`` until filled from the algorithm's context by
        ``agentrl.models.config.complete_model_config`` (a model needs it set).
      token_layout: ``"step"``: one token per step embedding ``obs_t``,
        ``a_{t-1}``, ``r_{t-1}``; ``"sar"``: three tokens per step ``obs_t``,
        ``a_t``, ``r_t`` (prediction read at the obs token); ``"transition"``:
        DPT, a query token then one token per context transition
        ``(s, a, r, s')`` (use ``predict_query``/``decode_transition``).
      head: ``"categorical"`` (discrete actions), ``"gaussian"`` or ``"mse"``
        (continuous actions).
      moe_layers: indices of layers whose FFN is T2MIR's token+task MoE.
      token_experts, token_top_k, token_noise: token-wise MoE (noisy gating
        with learned softplus noise, training only).
      task_experts, task_top_k: task-wise MoE (no noise).
      task_routing: ``"token"`` routes each token on its hidden state;
        ``"sequence"`` routes on the causal running mean of the hidden states
        inside the attention window (at the last token: the sequence mean).
      expert_ff: hidden width of each expert (default ``d_ff // 2``). The
        gates are ``Linear(d, E) -> tanh -> Linear(E, E)`` without biases
        (T2MIR's ``gate_network="mlp"``; ``E`` the MoE's expert count).
      moe_dispatch: ``"blocked"`` (token-expert pairs sorted by expert into
        blocks of one expert each, one batched matmul: top-k FLOPs plus a
        little padding), ``"sorted"`` (sorted pairs, ``ragged_dot``) or
        ``"dense"`` (every expert on every token, gates zero elsewhere). All
        exact; no token is dropped.
      rope_base: RoPE frequency base.
      attention: ``"blockwise"`` (one query block of ``attention_block``
        tokens at a time over only the keys its window sees: no ``[T, T]``
        array, masked-out blocks skipped) or ``"reference"`` (the full
        masked ``[T, T]`` score matrix). Equal to float rounding.
      attention_block: query block size of ``"blockwise"`` attention.
      attention_sink: Sink-KV (ReLIC): a learned per-layer, per-head key and
        value every query can attend to, so a head may attend to nothing.
        Off by default (no parameters then: existing checkpoints load).
      remat: rematerialise each block's activations in the backward pass
        (``nnx.remat``): less memory for more compute; same values. (Chunked
        blockwise attention recomputes its score tiles in the backward pass
        with or without ``remat``; its one-pass form for small inputs keeps
        them unless ``remat`` recomputes the block.)
      compute_dtype: ``"float32"`` or ``"bfloat16"`` (mixed precision): the
        transformer's matmuls (QKV, attention scores and values, output
        projection, FFN, MoE experts) take bfloat16 operands and accumulate
        and return float32; softmax, LayerNorm, residual stream, embeddings,
        routers, the action head and the loss stay float32, and so do the
        parameters and the optimizer state (cast at each use). The KV cache
        defaults to this dtype. For GPUs/TPUs: on CPU bfloat16 matmuls are
        usually slower than float32.
      positions: ``"token"`` (RoPE over the token position) or
        ``"episode"``, ReLIC's (``reset_position_index``,
        ``add_sequence_idx_embed`` with ``sequence_embed_type: rope`` and a
        learnable ``position_embed_type``): RoPE over the episode index
        (``step // episode_steps``), a learned embedding of the step within
        the episode (``step % episode_steps``) added to each token, and the
        learned start vector in place of the previous action and reward at
        every episode's first step (ReLIC's start action and reward input 0
        after a reset). For the "step" layout over sequences that start at
        an episode's first step, all episodes ``episode_steps`` long
        (transformer PPO's trials).
      episode_steps: steps per episode for ``positions="episode"`` (filled
        from the environment's horizon by the algorithm; a model needs it).
    """

    obs_kind: str = "discrete"
    obs_size: int = 25
    obs_encoding: str = "table"
    grid_size: int | None = None
    action_kind: str = "discrete"
    action_size: int = 5
    num_layers: int = 4
    num_heads: int = 8
    d_model: int = 128
    d_ff: int = 512
    ffn_activation: str = "gelu_tanh"
    normformer: bool = False
    dropout: float = 0.0
    embedding_dropout: float | None = None
    residual_dropout: float | None = None
    attention_dropout: float = 0.0
    max_steps: int | None = None
    token_layout: str = "step"
    head: str = "categorical"
    moe_layers: tuple[int, ...] = ()
    token_experts: int = 6
    token_top_k: int = 2
    token_noise: bool = True
    task_experts: int = 8
    task_top_k: int = 2
    task_routing: str = "token"
    expert_ff: int | None = None
    moe_dispatch: str = "blocked"

    #: fields a saved config may still hold, at the one value that meant what
    #: the model is now (``router_hidden``: gates of width d_model, until
    #: session 50; None, the default, in every preset)
    RETIRED_FIELDS: ClassVar[dict[str, Any]] = {"router_hidden": None}
    rope_base: float = 10000.0
    attention: str = "blockwise"
    attention_block: int = 128
    attention_sink: bool = False
    remat: bool = False
    compute_dtype: str = "float32"
    positions: str = "token"
    episode_steps: int | None = None

    def __post_init__(self):
        self._check_choices()
        self._check_sizes()
        if self.obs_encoding == "grid":
            self._check_grid()
        self._check_head()
        self._check_dropout()
        self._check_moe()

    def _check_choices(self) -> None:
        """Each choice field one of its allowed values, flags booleans."""
        _choice("obs_kind", self.obs_kind, OBS_KINDS)
        _choice("obs_encoding", self.obs_encoding, OBS_ENCODINGS)
        _choice("action_kind", self.action_kind, ACTION_KINDS)
        _choice("token_layout", self.token_layout, TOKEN_LAYOUTS)
        _choice("head", self.head, HEADS)
        _choice("task_routing", self.task_routing, TASK_ROUTINGS)
        _choice("moe_dispatch", self.moe_dispatch, MOE_DISPATCHES)
        _choice("attention", self.attention, ATTENTIONS)
        _choice("compute_dtype", self.compute_dtype, COMPUTE_DTYPES)
        _choice("positions", self.positions, POSITIONS)
        _choice("ffn_activation", self.ffn_activation, tuple(FFN_ACTIVATIONS))
        if self.positions == "episode" and self.token_layout != "step":
            raise ValueError(
                "ModelConfig.positions='episode' needs token_layout='step', got "
                f"{self.token_layout!r}"
            )
        _positive("attention_block", self.attention_block)
        for flag in ("remat", "attention_sink", "normformer"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(
                    f"ModelConfig.{flag} must be true or false, got "
                    f"{getattr(self, flag)!r}"
                )

    def _check_sizes(self) -> None:
        """Sizes positive (optional ones whenever set), RoPE's base and head size."""
        for name in ("obs_size", "action_size", "num_layers", "num_heads"):
            _positive(name, getattr(self, name))
        for name in ("d_model", "d_ff"):
            _positive(name, getattr(self, name))
        if self.max_steps is not None:
            _positive("max_steps", self.max_steps)
        # optional sizes are checked whenever set, used or not
        if self.grid_size is not None:
            _positive("grid_size", self.grid_size, 2)
        if self.expert_ff is not None:
            _positive("expert_ff", self.expert_ff)
        if self.episode_steps is not None:
            _positive("episode_steps", self.episode_steps)
        for name in ("token_experts", "token_top_k", "task_experts", "task_top_k"):
            _positive(name, getattr(self, name))
        if not isinstance(self.token_noise, bool):
            raise ValueError(
                "ModelConfig.token_noise must be true or false, got "
                f"{self.token_noise!r}"
            )
        if not is_number(self.rope_base) or self.rope_base <= 1.0:
            raise ValueError(
                f"ModelConfig.rope_base must be > 1 and finite, got {self.rope_base!r}"
            )
        if self.d_model % (2 * self.num_heads):
            raise ValueError(
                "ModelConfig.d_model must be a multiple of 2 * num_heads (even "
                f"head size for RoPE), got d_model={self.d_model}, "
                f"num_heads={self.num_heads}"
            )

    def _check_head(self) -> None:
        """The action head fits the action kind."""
        if self.action_kind == "discrete" and self.head != "categorical":
            raise ValueError(
                "ModelConfig.head must be 'categorical' for discrete actions, "
                f"got {self.head!r}"
            )
        if self.action_kind == "continuous" and self.head == "categorical":
            raise ValueError(
                "ModelConfig.head must be one of ('gaussian', 'mse') for "
                f"continuous actions, got {self.head!r}"
            )

    def _check_dropout(self) -> None:
        """Every dropout rate in [0, 1) (the two optional ones also None)."""
        rates = {
            "dropout": (self.dropout, False),
            "embedding_dropout": (self.embedding_dropout, True),
            "residual_dropout": (self.residual_dropout, True),
            "attention_dropout": (self.attention_dropout, False),
        }
        for name, (value, optional) in rates.items():
            if optional and value is None:
                continue
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not number or not 0.0 <= value < 1.0:
                unset = " or None (use ModelConfig.dropout)" if optional else ""
                raise ValueError(
                    f"ModelConfig.{name} must be in [0, 1){unset}, got {value!r}"
                )

    def _check_moe(self) -> None:
        """MoE layer indices and, with MoE layers, expert counts and sizes."""
        if not isinstance(self.moe_layers, tuple):
            raise ValueError(
                "ModelConfig.moe_layers must be a tuple of ints, got "
                f"{self.moe_layers!r}"
            )
        for i in self.moe_layers:
            if not isinstance(i, int) or not 0 <= i < self.num_layers:
                raise ValueError(
                    f"ModelConfig.moe_layers entries must be in [0, {self.num_layers})"
                    f", got {self.moe_layers!r}"
                )
        if self.moe_layers:
            if self.d_model % 2:
                raise ValueError("ModelConfig.d_model must be even with MoE layers")
            for e, k in (
                ("token_experts", "token_top_k"),
                ("task_experts", "task_top_k"),
            ):
                _positive(e, getattr(self, e))
                _positive(k, getattr(self, k))
                if getattr(self, k) > getattr(self, e):
                    raise ValueError(
                        f"ModelConfig.{k} must be <= {e}={getattr(self, e)}, "
                        f"got {getattr(self, k)}"
                    )
            if self.expert_ff is not None:
                _positive("expert_ff", self.expert_ff)

    def _check_grid(self) -> None:
        if self.obs_kind != "discrete":
            raise ValueError(
                "ModelConfig.obs_kind must be 'discrete' with obs_encoding='grid', "
                f"got {self.obs_kind!r}"
            )
        if self.grid_size is None:  # filled from the environment later
            return
        _positive("grid_size", self.grid_size, 2)
        if self.obs_size % (self.grid_size * self.grid_size):
            raise ValueError(
                "ModelConfig.obs_size must be a multiple of grid_size**2 with "
                f"obs_encoding='grid', got obs_size={self.obs_size}, "
                f"grid_size={self.grid_size}"
            )

    @property
    def embedding_dropout_rate(self) -> float:
        """Dropout on the tokens: ``embedding_dropout``, else ``dropout``."""
        if self.embedding_dropout is None:
            return self.dropout
        return self.embedding_dropout

    @property
    def residual_dropout_rate(self) -> float:
        """Dropout on the blocks' outputs: ``residual_dropout``, else ``dropout``."""
        if self.residual_dropout is None:
            return self.dropout
        return self.residual_dropout

    @property
    def grid_layers(self) -> int:
        """Number of ``grid_size**2`` cell blocks in the observation ids."""
        return self.obs_size // (self.grid_size * self.grid_size)

    @property
    def rope_period(self) -> int:
        """Tokens per RoPE position: ``episode_steps`` with episode
        positions (the rotation is the episode's index), else 1."""
        if self.positions == "episode":
            return self.episode_steps * self.tokens_per_step
        return 1

    @property
    def tokens_per_step(self) -> int:
        return TOKENS_PER_STEP[self.token_layout]

    @property
    def window_tokens(self) -> int:
        """Attention window in tokens: ``max_steps * tokens_per_step``."""
        return self.max_steps * self.tokens_per_step

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads

    @property
    def expert_hidden(self) -> int:
        return self.expert_ff if self.expert_ff is not None else self.d_ff // 2

    @property
    def has_moe(self) -> bool:
        return bool(self.moe_layers)


def complete_model_config(config: ModelConfig, env: Any, algo: Any) -> ModelConfig:
    """Fill obs/action kinds and sizes from ``env``'s spaces, and the window.

    The algorithm adapts the result (DT appends the return-to-go to the
    observation) and, when ``max_steps`` is unset, sets the attention window
    its training windows need (:meth:`Algorithm.context_steps`).
    """
    params = env.default_params
    obs_space, act_space = env.observation_space(params), env.action_space(params)
    discrete_obs = hasattr(obs_space, "n")
    if discrete_obs:
        obs_kind, obs_size = "discrete", int(obs_space.n)
    else:
        # a multi-axis Box (XLand's grid view) is embedded flattened
        obs_kind, obs_size = "continuous", int(math.prod(obs_space.shape))
    if hasattr(act_space, "n"):
        action = {
            "action_kind": "discrete",
            "action_size": int(act_space.n),
            "head": "categorical",
        }
    else:
        head = config.head if config.head != "categorical" else "gaussian"
        action = {
            "action_kind": "continuous",
            "action_size": int(act_space.shape[-1]),
            "head": head,
        }
    grid = {}
    if config.obs_encoding == "grid":
        size = getattr(env, "size", None)
        if not discrete_obs or not isinstance(size, int):
            raise ValueError(
                "model.obs_encoding='grid' needs a grid environment with discrete "
                f"cell observations and a 'size' (Dark Room, Key-to-Door), got {env!r}"
            )
        grid = {"grid_size": size}
    window = {}
    if config.max_steps is None:
        window = {"max_steps": algo.context_steps(env)}
    config = dataclasses.replace(
        config, obs_kind=obs_kind, obs_size=obs_size, **action, **grid, **window
    )
    return algo.complete_model(config, env)
