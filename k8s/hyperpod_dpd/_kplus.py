"""The one import of cdk8s-plus: moving to the package for a newer Kubernetes is a one-line change here."""

from hyperpod_dpd import _node

_node.ensure_node()

import cdk8s_plus_34 as kplus  # noqa: E402

__all__ = ["kplus"]
