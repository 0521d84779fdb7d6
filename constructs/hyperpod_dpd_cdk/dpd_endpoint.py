"""One DPD endpoint applied to the cluster: the spec's chart, pinned to the stack's node groups."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import cdk8s
from aws_cdk import Annotations, Stack
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IConstruct

from hyperpod_dpd import DpdSpec, HuggingFaceSource, S3Source, check
from hyperpod_dpd.charts import InferenceEndpointConfigChart
from hyperpod_dpd.contracts.operator import INSTANCE_GROUP_LABEL
from hyperpod_dpd_cdk.weights_staging import staged_prefix

BUILTIN_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})


def placed_spec(spec: DpdSpec, *, group_names: Mapping[str, str], bucket_region: str | None,
                staged_bucket: str | None = None) -> DpdSpec:
    """``spec`` with each role pinned to its instance group; an S3 source without a region gets ``bucket_region``.

    The bucket is never rewritten: an endpoint reads the bucket its spec names. A ``huggingface`` source
    names no bucket; the stack stages it into ``staged_bucket`` and the endpoint reads that copy.
    """
    prefill = dataclasses.replace(spec.prefill, node_selector={
        **spec.prefill.node_selector, INSTANCE_GROUP_LABEL: group_names["prefill"]})
    decode = dataclasses.replace(spec.decode, node_selector={
        **spec.decode.node_selector, INSTANCE_GROUP_LABEL: group_names["decode"]})
    placed = dataclasses.replace(spec, prefill=prefill, decode=decode)
    source = spec.model.source
    if isinstance(source, S3Source) and source.region is None and bucket_region is not None:
        pointed = dataclasses.replace(source, region=bucket_region)
        placed = dataclasses.replace(placed, model=dataclasses.replace(spec.model, source=pointed))
    if isinstance(source, HuggingFaceSource) and staged_bucket is not None:
        # The stack stages the revision into its bucket (weights_staging): the endpoint reads that copy.
        staged = S3Source(bucket=staged_bucket, prefix=staged_prefix(source), region=bucket_region)
        placed = dataclasses.replace(placed, model=dataclasses.replace(spec.model, source=staged))
    return placed


class DpdEndpoint(Construct):
    """Applies one DPD ``InferenceEndpointConfig`` to the cluster, after the operator add-on.

    The spec's per-role node selectors gain ``sagemaker.amazonaws.com/instance-group-name`` so prefill
    and decode pods land on their own instance groups. An S3 model source is read as the spec names it
    (the stack grants its roles that bucket); only a missing region is filled in. The spec's warnings
    become CDK warnings (``hyperpod-dpd:<code>``).

    :param cluster: the EKS cluster (with a kubectl provider). :param spec: the endpoint.
    :param group_names: instance group per role, ``{"prefill": ..., "decode": ...}``.
    :param bucket_region: the bucket's region when the spec leaves it out. :default: - the stack's region
    :param staged_bucket: where the stack staged a ``huggingface`` source. :default: - none (S3 sources)
    :param after: constructs that must exist first (the operator add-on). :default: - none
    :param create_namespace: also apply the spec's namespace. :default: - when it is not built in
    """

    def __init__(self, scope: Construct, id: str, *, cluster: eks.ICluster, spec: DpdSpec,
                 group_names: Mapping[str, str], bucket_region: str | None = None, staged_bucket: str | None = None,
                 after: tuple[IConstruct, ...] = (), create_namespace: bool | None = None) -> None:
        super().__init__(scope, id)
        region = bucket_region or Stack.of(self).region
        self.spec = placed_spec(spec, group_names=group_names, bucket_region=region, staged_bucket=staged_bucket)
        self.checked = check(self.spec)
        for warning in self.checked.warnings:
            Annotations.of(self).add_warning_v2(f"hyperpod-dpd:{warning.code}",
                                                f"endpoint {spec.name!r}: {warning.field}: {warning.message}")
        self.cdk8s_app = cdk8s.App()
        self.chart = InferenceEndpointConfigChart(self.cdk8s_app, spec.name, spec=self.checked, region=region)
        self.manifest = cluster.add_cdk8s_chart(f"{id}Manifest", self.chart)
        if create_namespace is None:
            create_namespace = spec.namespace not in BUILTIN_NAMESPACES
        self.namespace_manifest: eks.KubernetesManifest | None = None
        if create_namespace:
            self.namespace_manifest = eks.KubernetesManifest(
                self, "Namespace", cluster=cluster, overwrite=True,
                manifest=[{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": spec.namespace}}])
            self.manifest.node.add_dependency(self.namespace_manifest)
        for dependency in after:
            self.manifest.node.add_dependency(dependency)

    def manifests(self) -> list[dict[str, Any]]:
        """The Kubernetes objects this endpoint applies (CDK tokens unresolved)."""
        objects: list[dict[str, Any]] = self.chart.to_json()
        return objects
