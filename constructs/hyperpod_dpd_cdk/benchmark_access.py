"""What ``hyperpod-dpd bench`` needs from the stack: its ServiceAccount's IAM role, and the aggregated twins.

The role (IRSA) is trusted by exactly one ServiceAccount in one namespace, reads only the tokenizer
files under each model prefix, and writes only under the results prefix. The aggregated twin of an
endpoint is the baseline DPD is measured against: one more instance group of one node, and the
twin's ``InferenceEndpointConfig`` pinned to it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct, IConstruct

from hyperpod_dpd import DpdSpec, Problem, SpecError
from hyperpod_dpd.charts.aggregated import aggregated_spec, render_aggregated_endpoint_config
from hyperpod_dpd.contracts.bench_job import DEFAULT_SERVICE_ACCOUNT, MANAGED_BY, RESULTS_PREFIX, ROLE_ARN_ANNOTATION
from hyperpod_dpd.contracts.operator import INSTANCE_GROUP_LABEL, router_service
from hyperpod_dpd.contracts.tokenizer import TOKENIZER_FILES
from hyperpod_dpd_cdk._private.nag import acknowledge
from hyperpod_dpd_cdk.dpd_endpoint import placed_spec
from hyperpod_dpd_cdk.hyperpod_cluster import InstanceGroup, group_name
from hyperpod_dpd_cdk.inference_operator import IrsaTrust
from hyperpod_dpd_cdk.lifecycle import PrefixReads, prefix_findings
from hyperpod_dpd_cdk.model_bucket import grant_bucket_key

DEFAULT_RESULTS_PREFIX = RESULTS_PREFIX  # where bench uploads by default
AGGREGATED_GROUP = "aggregated"


class BenchmarkAccess(Construct):
    """The benchmark ServiceAccount's IAM role, and (with ``cluster``) the ServiceAccount annotated with it.

    :param trust: the cluster's IRSA trust (``InferenceOperator.trust``).
    :param namespace: where ``hyperpod-dpd bench`` runs its Job.
    :param model_bucket: the weights. :param model_prefixes: one per model; the tokenizer files under each.
    :param results_prefix: where the Job may upload results. :default: benchmarks
    :param service_account: :default: hyperpod-dpd-bench
    :param cluster: apply the ServiceAccount there. :default: - the role only
    :param after: constructs the ServiceAccount must follow (its namespace). :default: - none
    :param overwrite: apply the ServiceAccount (``kubectl apply``) rather than create it (``kubectl create``, which
        fails on one that exists instead of adopting it). :default: True
    """

    def __init__(self, scope: Construct, id: str, *, trust: IrsaTrust, namespace: str, model_bucket: s3.IBucket,
                 model_prefixes: Sequence[str], results_prefix: str = DEFAULT_RESULTS_PREFIX,
                 service_account: str = DEFAULT_SERVICE_ACCOUNT, cluster: eks.ICluster | None = None,
                 after: Sequence[IConstruct] = (), overwrite: bool = True) -> None:
        super().__init__(scope, id)
        results = results_prefix.strip("/")
        if not results:
            raise SpecError([Problem(field="results_prefix", value=results_prefix, message="is empty: the Job could "
                                     "write anywhere in the bucket", fix=f"use e.g. {DEFAULT_RESULTS_PREFIX!r}")])
        self.service_account_name = service_account
        self.namespace = namespace
        self.results_prefix = results
        subject = f"system:serviceaccount:{namespace}:{service_account}"
        self.role = iam.Role(self, "Role", assumed_by=trust.principal(f"Benchmark-{namespace}", subject),
                             description=f"hyperpod-dpd bench in {namespace}: read tokenizers, write results")
        self._model_bucket = model_bucket
        self._tokenizer_reads = PrefixReads(self.role, model_bucket, model_prefixes, grant=self._tokenizers)
        self.role.add_to_policy(iam.PolicyStatement(actions=["s3:PutObject"],
                                                    resources=[model_bucket.arn_for_objects(f"{results}/*")]))
        grant_bucket_key(model_bucket, self.role, write=True)
        acknowledge(self.role, "IAM5", "The benchmark writes result files with run-specific names under its results "
                    "prefix only.", prefix_findings(model_bucket, [results]))
        self.manifest: eks.KubernetesManifest | None = None
        if cluster is not None:
            self.manifest = eks.KubernetesManifest(self, "ServiceAccount", cluster=cluster, overwrite=overwrite,
                                                   manifest=[{
                "apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": service_account, "namespace": namespace, "labels": dict(MANAGED_BY),
                             "annotations": {ROLE_ARN_ANNOTATION: self.role.role_arn}},
                "automountServiceAccountToken": False}])
            for dependency in after:
                self.manifest.node.add_dependency(dependency)

    def add_model_prefixes(self, prefixes: Sequence[str]) -> None:
        """Let the Job read the tokenizer files under these prefixes too (an endpoint added later)."""
        self._tokenizer_reads.add(prefixes)

    def _tokenizers(self, prefixes: Sequence[str]) -> tuple[list[str], dict[str, Any]]:
        """The tokenizer files under each prefix, and a listing of exactly those prefixes."""
        return ([self._model_bucket.arn_for_objects(f"{prefix}/{name}") for prefix in prefixes
                 for name in TOKENIZER_FILES], {"StringEquals": {"s3:prefix": [f"{prefix}/" for prefix in prefixes]}})


def aggregated_group_name(spec: DpdSpec) -> str:
    """``<spec.name>-aggregated``."""
    return f"{spec.name}-{AGGREGATED_GROUP}"


def aggregated_groups(specs: Sequence[DpdSpec], groups: Sequence[InstanceGroup]) -> list[InstanceGroup]:
    """One one-node group per endpoint for its twin, otherwise as the endpoint's prefill group."""
    by_name = {group.name: group for group in groups}
    return [dataclasses.replace(by_name[group_name(spec, "prefill")], name=aggregated_group_name(spec), count=1)
            for spec in specs]


class AggregatedTwin(Construct):
    """Applies the aggregated twin of ``spec`` (``<name>-agg``: no ``pdSpec``, one replica) on its instance group.

    :param cluster: the EKS cluster. :param spec: the DPD endpoint it is the twin of.
    :param staged_bucket: where the stack staged a ``huggingface`` source. :default: - none (S3 sources)
    :param after: constructs that must exist first (the operator add-on, the namespace). :default: - none
    """

    def __init__(self, scope: Construct, id: str, *, cluster: eks.ICluster, spec: DpdSpec,
                 staged_bucket: str | None = None, after: Sequence[IConstruct] = ()) -> None:
        super().__init__(scope, id)
        region = Stack.of(self).region
        placed = placed_spec(spec, group_names={role: group_name(spec, role) for role, _ in spec.roles()},
                             bucket_region=region, staged_bucket=staged_bucket)
        twin = aggregated_spec(placed)
        self.spec_name = spec.name
        self.name = twin.name
        self.router_service = router_service(twin)
        self.group_name = aggregated_group_name(spec)
        self.document = render_aggregated_endpoint_config(placed, region=region,
                                                          node_selector={INSTANCE_GROUP_LABEL: self.group_name})
        self.manifest = eks.KubernetesManifest(self, "Manifest", cluster=cluster, manifest=[self.document])
        for dependency in after:
            self.manifest.node.add_dependency(dependency)
