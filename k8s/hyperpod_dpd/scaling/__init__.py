"""SLO autoscaling: a role's KEDA triggers compiled from its latency targets and one replica's capacity."""

from hyperpod_dpd.scaling.compiled import CompiledScaling, CompiledTrigger, RoleCapacity, Signal

__all__ = ["CompiledScaling", "CompiledTrigger", "RoleCapacity", "Signal"]
