"""The Algorithm protocol: one object per in-context learner, registered by name.

An algorithm is a frozen dataclass whose fields are its hyperparameters. It
owns everything that differs between learners, so that the training loop,
the sweep and the evaluation harness only ever ask the object:

- its **config fields**, their defaults and validation (``__post_init__``),
  and the checks that involve the rest of the experiment (:meth:`check`:
  token layout, MoE layers, batch size);
- what it needs from the **model** (:meth:`complete_model`: e.g. DT's
  return-conditioned observation; :meth:`context_steps`: the attention
  window its training windows need, from which ``model.max_steps`` is
  derived when unset; :meth:`build_model`: the module trained, a
  ``DecisionModel`` unless the learner trains more beside it);
- its **batch sampler** (:meth:`make_sampler`) and **loss**
  (:meth:`loss`), with any **auxiliary training state** (:meth:`init_aux`,
  :meth:`update_aux`: T2MIR's EMA router);
- which hyperparameters are **traced**: declared once, on the field, with
  :func:`agentrl.configtools.traced` (as Rejax marks pytree fields); the
  update step takes them as a pytree of scalars, so one compiled program
  can vmap over them;
- how it **acts in context** at evaluation (:meth:`make_agent`: AD's rolling
  KV cache, DPT's context set, DT's return conditioning).

Learners trained from a dataset (``trains_online = False``) use the shared
supervised update program of :mod:`agentrl.train`. A learner trained online
by RL across multi-episode trials (RL², a long-context transformer PPO) sets
``trains_online = True`` and brings its own jitted program instead of a
sampler and a loss: :meth:`make_online_train` returns ``train(key, hparams)
-> (state, metrics)``, a pure function of the config and a key, vmappable
over seeds and traced hyperparameters, whose state holds the same
``params``/``rest`` model leaves, so checkpoints, :meth:`make_agent` and
therefore evaluation and sweeps treat both kinds alike.

Registering: decorate the class with :func:`register_algorithm`;
``get(name)`` builds it with its defaults. A new algorithm is one module (see
``notebooks/04_custom_algorithm.ipynb``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, ClassVar

import jax
import numpy as np
from flax import nnx

from agentrl.configtools import default_hparams
from agentrl.models.transformer import DecisionModel
from agentrl.registry import Registry, caller_module

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "check",
    "get",
    "names",
    "register_algorithm",
]


def check(cond: bool, message: str) -> None:
    """Raise ``ValueError(message)`` unless ``cond`` (config validation)."""
    if not cond:
        raise ValueError(message)


@dataclasses.dataclass(frozen=True)
class Algorithm:
    """Base class of the in-context learners (see the module docstring).

    Subclasses set ``name`` and ``description`` and override what differs.
    Shapes: batches are dicts of ``[B, ...]`` arrays from the sampler;
    ``hparams`` holds this algorithm's traced fields as float32 scalars.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: token layouts the algorithm's batches and acting use
    token_layouts: ClassVar[tuple[str, ...]] = ("step", "sar")
    #: whether the model must have (True) or must not have (False) MoE layers
    needs_moe: ClassVar[bool] = False
    #: False: trained by the shared supervised program from a dataset; True:
    #: brings its own online RL program (:meth:`make_online_train`)
    trains_online: ClassVar[bool] = False
    #: whether its sequences are whole episodes of the env's horizon from an
    #: episode's first step, as ``model.positions="episode"`` needs
    episode_positions: ClassVar[bool] = False

    @property
    def label(self) -> str:
        """The name results and titles show (``t2mir_ad`` for T2MIR over AD)."""
        return self.name

    # ----- configuration -------------------------------------------------
    def check(self, config: Any) -> None:
        """Checks that involve the rest of the ``ExperimentConfig``.

        Raises ``ValueError`` naming the field and what is allowed; runs when
        the config is built, before anything compiles.
        """
        self.check_layout(config.model)
        check(
            self.needs_moe == bool(config.model.moe_layers),
            f"model.moe_layers must be {'non-empty' if self.needs_moe else 'empty'} "
            f"for algo {self.label!r}, got {config.model.moe_layers!r}",
        )
        check(
            config.model.positions == "token" or self.episode_positions,
            "model.positions='episode' (ReLIC's) needs sequences of whole "
            "episodes from an episode's first step: algo 'transformer_ppo'; "
            f"use 'token' for algo {self.label!r}",
        )

    def check_layout(self, model_config: Any) -> None:
        layout = model_config.token_layout
        check(
            layout in self.token_layouts,
            f"model.token_layout must be {' or '.join(self.token_layouts)} for "
            f"algo {self.label!r}, got {layout!r}",
        )

    def complete_model(self, model_config: Any, env: Any) -> Any:
        """The model config with algorithm-specific fields filled (default: as is)."""
        return model_config

    def context_steps(self, env: Any) -> int:
        """Attention window (in steps) that the training windows need."""
        raise NotImplementedError

    def resolve(self, env: Any, dataset: Any | None) -> Algorithm:
        """This algorithm with fields derived from the env or data filled in."""
        return self

    def build_model(self, model_config: Any, rngs: nnx.Rngs) -> Any:
        """The trained module of a completed ``model_config`` (default: the
        :class:`~agentrl.models.transformer.DecisionModel`; Meta-DT adds its
        world model beside it). Its ``nnx.Param`` leaves are what the update
        step trains and the checkpoint holds."""
        return DecisionModel(model_config, rngs=rngs)

    # ----- training from a dataset ----------------------------------------
    def make_sampler(self, dataset: Any, train: Any, *, paired: bool = False) -> Any:
        """A sampler with ``host_batch(step) -> {name: np.ndarray [B, ...]}``."""
        raise NotImplementedError

    def loss(
        self,
        model: Any,
        batch: dict[str, jax.Array],
        aux: Any,
        hparams: dict[str, jax.Array],
        *,
        env: Any,
        deterministic: bool = False,
    ) -> tuple[jax.Array, dict[str, jax.Array], Any]:
        """``(loss, metrics, model output)`` of one batch."""
        raise NotImplementedError

    def init_aux(self, model: Any) -> Any:
        """Auxiliary training state saved with the model (``None``: none)."""
        return None

    def update_aux(self, aux: Any, model: Any, hparams: dict[str, jax.Array]) -> Any:
        """The auxiliary state after an optimizer step (``model`` is updated)."""
        return aux

    # ----- training online by RL ------------------------------------------
    def make_online_train(self, config: Any, env: Any) -> Callable[..., Any]:
        """``train(key, hparams) -> (state, metrics)`` for online learners."""
        raise NotImplementedError(f"algo {self.name!r} trains from a dataset")

    # ----- how the runner trains and restores it -------------------------------
    def by_training(self, *, from_data: Any, online: Any) -> Any:
        """``from_data`` for a learner distilled from a dataset, ``online`` for
        one trained by RL (:meth:`make_online_train`).

        The one question outside this package about how a learner is
        trained: the runner picks its learner with it, the sweep its member
        trainer, evaluation the controls that apply.
        """
        return online if self.trains_online else from_data

    def load_policy(self, config: Any, env: Any, read: Callable[..., Any]):
        """``(policy, checkpoint meta)`` from a run's checkpoint.

        ``read(like, partial) -> (state, meta)`` restores ``like``'s arrays
        (``partial``: only its top-level parts). A distilled learner reads the
        decision model's ``params``/``rest`` (no optimizer is built); an online
        learner its whole trainer state, whose policy is
        ``program.weights(state)``.
        """
        if self.trains_online:
            return _load_online_policy(config, env, read)
        model = self.build_model(config.model, nnx.Rngs(config.train.seed))
        graphdef, params, rest = nnx.split(model, nnx.Param, ...)
        part, meta = read({"params": params, "rest": rest}, True)
        return nnx.merge(graphdef, part["params"], part["rest"]), meta

    # ----- acting in context ------------------------------------------------
    def make_agent(self, model: Any, env: Any, num_steps: int, config: Any) -> Any:
        """A batched agent (``agentrl.evaluate.agents.BatchedAgent``) for ``model``.

        ``model`` is an NNX module or a ``ModelHandle``; ``num_steps`` the
        number of environment steps it will act for; ``config`` the run's
        (completed) ``ExperimentConfig`` with the acting settings in
        ``config.eval``.
        """
        raise NotImplementedError

    # ----- (de)serialisation --------------------------------------------------
    def to_config_dict(self) -> dict[str, Any]:
        """``{"name": ..., field: value, ...}`` (nested algorithms as dicts)."""
        out: dict[str, Any] = {"name": self.name}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = (
                value.to_config_dict() if isinstance(value, Algorithm) else value
            )
        return out

    @classmethod
    def from_config_dict(cls, data: dict[str, Any] | str) -> Algorithm:
        """Rebuild an algorithm from :meth:`to_config_dict` output (or a name)."""
        if isinstance(data, str):
            return get(data)
        data = dict(data)
        name = data.pop("name", None)
        algo_cls = get_class(name)
        fields = {f.name: f for f in dataclasses.fields(algo_cls)}
        unknown = sorted(set(data) - set(fields))
        check(
            not unknown,
            f"algo {name!r}: unknown field(s) {unknown}; fields: {sorted(fields)}",
        )
        kwargs = {}
        for key, value in data.items():
            if isinstance(value, dict) and "name" in value:
                value = Algorithm.from_config_dict(value)
            elif isinstance(value, list):
                value = _to_tuple(value)
            kwargs[key] = value
        return algo_cls(**kwargs)

    @classmethod
    def from_config_value(cls, text: Any) -> Algorithm:
        """``--algo NAME`` on the command line: the registered algorithm's defaults."""
        return get(str(text))


def _to_tuple(x: Any) -> Any:
    return tuple(_to_tuple(v) for v in x) if isinstance(x, list) else x


#: algorithms by name: a class (built with its defaults) or a variant's factory
ALGORITHMS = Registry("algorithm")


def register_algorithm(
    cls_or_name: type[Algorithm] | str, factory: Callable[[], Algorithm] | None = None
) -> Any:
    """Make an algorithm available by name; returns what it registers.

    ``@register_algorithm`` on a class registers it under ``cls.name`` (built
    with its defaults); ``register_algorithm(name, factory)`` registers a
    named preset of a registered class (``t2mir_ad``: T2MIR over AD). The
    same object again is harmless, a class defined again (a notebook cell
    re-run) replaces itself, another under a taken name is a ``ValueError``
    naming both (:mod:`agentrl.registry`).
    """
    module = caller_module()
    if isinstance(cls_or_name, str):
        check(callable(factory), f"algorithm {cls_or_name!r} needs a factory")
        return ALGORITHMS.register(cls_or_name, factory, module=module)
    cls = cls_or_name
    check(
        isinstance(cls, type) and issubclass(cls, Algorithm),
        f"register_algorithm takes an Algorithm subclass, got {cls!r}",
    )
    check(bool(cls.name), f"{cls.__name__} needs a non-empty `name`")
    return ALGORITHMS.register(cls.name, cls, module=module)


def names() -> list[str]:
    """Every registered name (classes and variants)."""
    return ALGORITHMS.names()


def get(name: str) -> Algorithm:
    """The registered algorithm ``name`` with its default settings."""
    check(
        name in ALGORITHMS,
        f"algo must be one of {tuple(names())}, got {name!r}{ALGORITHMS.hint(name)}",
    )
    return ALGORITHMS.get(name)()


def _is_class(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, Algorithm)


def get_class(name: str | None) -> type[Algorithm]:
    """The registered class ``name`` (what a saved config names)."""
    classes = tuple(n for n, obj in ALGORITHMS.items() if _is_class(obj))
    check(
        name in classes,
        f"algo must be one of {tuple(sorted(classes))}, got {name!r}"
        f"{ALGORITHMS.hint(name)}",
    )
    return ALGORITHMS.get(name)


def _load_online_policy(config: Any, env: Any, read: Callable[..., Any]):
    """An online learner's policy weights and checkpoint meta (see ``load_policy``)."""
    program = config.algo.make_online_train(config, env)
    like = jax.eval_shape(
        program.init, jax.random.key(config.train.seed), default_hparams(config)
    )
    like = jax.tree.map(_placeholder, like)
    state, meta = read(like, False)
    return program.weights(state), meta


def _placeholder(x: Any) -> Any:
    """A concrete array shaped like ``x`` to restore into (keys stay keys)."""
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        # key arrays of any shape (an env state may hold one per env)
        keys = jax.random.split(jax.random.key(0), math.prod(x.shape))
        return keys.reshape(x.shape)
    return np.zeros(x.shape, x.dtype)
