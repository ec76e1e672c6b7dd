"""ICRL algorithms: a loss and a way to act in context for each.

- ``ad`` / ``ad_eps``: :func:`agentrl.algos.ad.ad_loss` (same loss; AD-ε
  differs only in its noise-curriculum data);
- ``dpt``: :func:`agentrl.algos.dpt.dpt_loss`;
- ``dt``: :func:`agentrl.algos.dt.dt_loss` (return-conditioned baseline);
- ``t2mir_ad`` / ``t2mir_dpt``: :func:`agentrl.algos.t2mir.t2mir_loss` around
  the AD or DPT loss, on the MoE model.
"""

from agentrl.algos.ad import ad_loss
from agentrl.algos.dpt import dpt_loss
from agentrl.algos.dt import dt_loss, returns_to_go
from agentrl.algos.t2mir import t2mir_loss

__all__ = ["ad_loss", "dpt_loss", "dt_loss", "returns_to_go", "t2mir_loss"]
