"""What the T2MIR experiments share: the MoE in the preset's last layer."""

from typing import Any


def moe_last(change: dict[str, Any], base_layers: int) -> dict[str, Any]:
    """A preset's ``change`` with ``model.moe_layers`` set to its last layer."""
    layers = change.get("model.num_layers", base_layers)
    return {**change, "model.moe_layers": (layers - 1,)}
