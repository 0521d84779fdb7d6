"""What the stack may change on its EKS cluster: everything on a cluster it created; on one it did not, only its own.

One rule, enforced here for every part: on an existing (shared) cluster the stack creates only what is
absent and deletes only what it created.

- EKS add-ons are created with ``ResolveConflicts: NONE`` (a self-managed copy, say a Helm-installed
  cert-manager, makes the deploy fail instead of being adopted) and ``PreserveOnDelete: true`` (once
  installed onto a shared cluster, other tenants may rely on it: ``cdk destroy`` leaves its software).
- Helm releases and the benchmark ServiceAccount get a name of their own, per stack (``helm upgrade
  --install`` adopts any release of the same name, and ``helm uninstall`` removes it; ``kubectl apply``
  adopts an object of the same name, and ``kubectl delete`` removes it).
- Namespaces are created with ``kubectl create`` (fails on one that exists), never ``kubectl apply``;
  namespaces the cluster has already are declared (``ExistingEksCluster.namespaces``), used, and never
  created or deleted.
- Every manifest and chart waits for the kubectl provider's access entry on create and goes before it on
  delete (aws-cdk-lib orders them so only for clusters it creates: ``KubectlReadyBarrier``).

On a cluster the stack created, nothing else lives there: add-ons overwrite the self-managed copies EKS
itself installs (``vpc-cni``, ``kube-proxy``, ``coredns``), and names stay what they have always been.
"""

from __future__ import annotations

import hashlib
import re

import jsii
from aws_cdk import AspectPriority, Aspects, IAspect, Stack
from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IConstruct

MAX_RELEASE_NAME = 53  # Helm: a release name is a DNS-1123 label of at most 53 characters
STACK_LABEL = "hyperpod-dpd.aws/stack"
MANAGED_BY = {"app.kubernetes.io/managed-by": "hyperpod-dpd"}
# The kubectl provider's custom resources: each runs kubectl or helm as the provider's role.
KUBECTL_RESOURCES = (eks.KubernetesManifest, eks.HelmChart, eks.KubernetesPatch, eks.KubernetesObjectValue)


def per_stack_name(name: str, stack_name: str, *, limit: int = MAX_RELEASE_NAME) -> str:
    """``<name>-<stack slug>-<hash>``: lower-case, at most ``limit`` characters, distinct per stack name."""
    digest = hashlib.sha256(stack_name.encode()).hexdigest()[:6]
    slug = re.sub(r"[^a-z0-9-]", "-", stack_name.lower()).strip("-")
    room = limit - len(name) - len(digest) - 2
    slug = slug[:max(room, 0)].strip("-")
    return "-".join(part for part in (name, slug, digest) if part)


class ClusterOwnership:
    """The rule above, for a cluster the stack created (``owned``) or one it did not.

    :param owned: the stack created the cluster. :param stack_name: names what the stack makes on a shared one.
    :param existing_namespaces: namespaces a shared cluster has already. :default: - none
    """

    def __init__(self, *, owned: bool, stack_name: str, existing_namespaces: frozenset[str] = frozenset()) -> None:
        self.owned = owned
        self.stack_name = stack_name
        self.existing_namespaces = existing_namespaces

    @classmethod
    def of_stack(cls, scope: Construct) -> ClusterOwnership:
        """A cluster the stack owns (parts used on their own, outside ``HyperPodDpd``)."""
        return cls(owned=True, stack_name=Stack.of(scope).stack_name)

    def addon(self, scope: Construct, id: str, *, addon_name: str, cluster_name: str, addon_version: str | None,
              service_account_role_arn: str | None = None, configuration_values: str | None = None,
              pod_identity_associations: list[eks_l1.CfnAddon.PodIdentityAssociationProperty] | None = None,
              ) -> eks_l1.CfnAddon:
        """An EKS add-on: overwriting the self-managed copies of an own cluster; on a shared one, adopting none
        and left installed on delete."""
        return eks_l1.CfnAddon(
            scope, id, addon_name=addon_name, cluster_name=cluster_name, addon_version=addon_version,
            resolve_conflicts="OVERWRITE" if self.owned else "NONE",
            preserve_on_delete=None if self.owned else True,
            service_account_role_arn=service_account_role_arn, configuration_values=configuration_values,
            pod_identity_associations=pod_identity_associations)

    def own_name(self, name: str) -> str:
        """The name of something the stack makes beside others' (a Helm release, a ServiceAccount): ``name`` on
        an own cluster, a per-stack one on a shared cluster."""
        return name if self.owned else per_stack_name(name, self.stack_name)

    def creates_namespace(self, namespace: str) -> bool:
        """A shared cluster's declared namespaces are used as they are, never created or deleted."""
        return self.owned or namespace not in self.existing_namespaces

    def namespace(self, scope: Construct, id: str, *, cluster: eks.ICluster, namespace: str) -> eks.KubernetesManifest:
        """The namespace, applied on an own cluster; on a shared one created with ``kubectl create``, which
        fails on a namespace that exists rather than adopting it (and so deleting it on ``cdk destroy``)."""
        metadata: dict[str, object] = {"name": namespace}
        if not self.owned:
            metadata["labels"] = {**MANAGED_BY, STACK_LABEL: per_stack_name("s", self.stack_name, limit=63)}
        return eks.KubernetesManifest(scope, id, cluster=cluster, overwrite=self.owned,
                                      manifest=[{"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}])

    def order_after_access(self, scope: IConstruct, access_entry: IConstruct) -> None:
        """Every kubectl/helm resource under ``scope`` after ``access_entry`` (created after, deleted before)."""
        Aspects.of(scope).add(_AfterAccess(access_entry), priority=AspectPriority.MUTATING)


@jsii.implements(IAspect)
class _AfterAccess:
    """aws-eks-v2's ``KubectlReadyBarrier``, for an imported cluster: kubectl/helm only while the entry exists."""

    def __init__(self, access_entry: IConstruct) -> None:
        self._access_entry = access_entry

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, KUBECTL_RESOURCES):
            node.node.add_dependency(self._access_entry)
