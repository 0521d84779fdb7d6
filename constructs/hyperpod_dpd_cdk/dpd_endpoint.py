"""One DPD endpoint applied to the cluster: the spec's chart, pointed at the stack's bucket and node groups."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import cdk8s
from aws_cdk import Annotations, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3 as s3
from constructs import Construct, IConstruct

from hyperpod_dpd import DpdSpec, HuggingFaceSource, S3Source, check
from hyperpod_dpd.charts import InferenceEndpointConfigChart
from hyperpod_dpd.operator_names import INSTANCE_GROUP_LABEL
from hyperpod_dpd_cdk.weights_staging import staged_prefix

BUILTIN_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})


def placed_spec(spec: DpdSpec, *, group_names: Mapping[str, str], model_bucket: s3.IBucket | None,
                bucket_region: str | None) -> DpdSpec:
    """``spec`` with each role pinned to its instance group and an S3 source pointed at ``model_bucket``."""
    prefill = dataclasses.replace(spec.prefill, node_selector={
        **spec.prefill.node_selector, INSTANCE_GROUP_LABEL: group_names["prefill"]})
    decode = dataclasses.replace(spec.decode, node_selector={
        **spec.decode.node_selector, INSTANCE_GROUP_LABEL: group_names["decode"]})
    placed = dataclasses.replace(spec, prefill=prefill, decode=decode)
    source = spec.model.source
    if isinstance(source, S3Source) and model_bucket is not None:
        pointed = dataclasses.replace(source, bucket=model_bucket.bucket_name, region=bucket_region)
        placed = dataclasses.replace(placed, model=dataclasses.replace(spec.model, source=pointed))
    if isinstance(source, HuggingFaceSource) and model_bucket is not None:
        # The stack stages the revision into its bucket (weights_staging): the endpoint reads that copy.
        staged = S3Source(bucket=model_bucket.bucket_name, prefix=staged_prefix(source), region=bucket_region)
        placed = dataclasses.replace(placed, model=dataclasses.replace(spec.model, source=staged))
    return placed


class DpdEndpoint(Construct):
    """Applies one DPD ``InferenceEndpointConfig`` to the cluster, after the operator add-on.

    The spec's per-role node selectors gain ``sagemaker.amazonaws.com/instance-group-name`` so prefill
    and decode pods land on their own instance groups. An S3 model source is pointed at
    ``model_bucket`` (keeping its prefix); the spec's bucket name is replaced, with a warning if it
    differed. The spec's warnings become CDK warnings (``hyperpod-dpd:<code>``).

    :param cluster: the EKS cluster (with a kubectl provider). :param spec: the endpoint.
    :param group_names: instance group per role, ``{"prefill": ..., "decode": ...}``.
    :param model_bucket: the stack's weights bucket. :default: - the spec's source as written
    :param bucket_region: the bucket's region. :default: - the stack's region
    :param after: constructs that must exist first (the operator add-on). :default: - none
    :param create_namespace: also apply the spec's namespace. :default: - when it is not built in
    """

    def __init__(self, scope: Construct, id: str, *, cluster: eks.ICluster, spec: DpdSpec,
                 group_names: Mapping[str, str], model_bucket: s3.IBucket | None = None,
                 bucket_region: str | None = None, after: tuple[IConstruct, ...] = (),
                 create_namespace: bool | None = None) -> None:
        super().__init__(scope, id)
        region = bucket_region or Stack.of(self).region
        source = spec.model.source
        if (isinstance(source, S3Source) and model_bucket is not None
                and source.bucket != model_bucket.bucket_name):
            Annotations.of(self).add_warning_v2(
                "hyperpod-dpd:ModelBucketReplaced",
                f"endpoint {spec.name!r}: model.source.s3.bucket {source.bucket!r} is replaced by the stack's model "
                f"bucket; upload the weights to s3://<model bucket>/{source.prefix}/ (or pass the existing bucket "
                "with model_bucket_name / -c model_bucket=...)")
        self.spec = placed_spec(spec, group_names=group_names, model_bucket=model_bucket, bucket_region=region)
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
