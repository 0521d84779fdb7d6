"""The one import of cdk8s-plus: moving to the package for a newer Kubernetes is a one-line change here."""

import cdk8s_plus_34 as kplus

__all__ = ["kplus"]
