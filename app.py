#!/usr/bin/env python3
"""The hyperpod-dpd CDK app: one stack with a HyperPod EKS cluster serving DPD endpoints.

Run it with the CDK CLI (``cdk synth``, ``cdk deploy``) or directly (``python app.py``), which
reads cdk.json's context itself so both write the same cloud assembly. Options are CDK context
(``scripts/docs.py`` writes this list from the table in hyperpod_dpd_cdk.app):

.. BEGIN generated: context-usage
    spec=PATH[,PATH...]
        endpoint spec files, comma-separated (one cluster, several endpoints); default: the embedded
        Llama 3.3 70B example
    region=REGION
        the stack's region; the account is never looked up; default: the first spec's S3 region,
        else us-west-2
    availability_zone_id=AZ_ID
        the AZ ID of your GPU capacity; default: usw2-az2
    stack_name=NAME
        the stack's name; default: HyperPodDpd
    model_bucket=NAME
        that bucket exists already: use it (it must be the specs' bucket); default: the stack
        creates the bucket the specs name (retained)
    admin_role_arns=ARN[,ARN...]
        EKS cluster admins; default: none
    dependency_chart=DIR
        the prepared HyperPod dependency chart (scripts/prepare_hyperpod_chart.sh); default: device
        plugins only
    training_plan_arn=ARN
        reserved capacity for every instance group; default: on-demand capacity
    hyperpod_cluster_name=NAME
        the HyperPod cluster's name; default: <stack_name>-hp
    eks_cluster=NAME
        an existing EKS cluster, in an existing VPC (vpc_id); needs oidc_issuer_url and
        oidc_provider_arn; default: a new cluster
    oidc_issuer_url=URL
        with eks_cluster: its OIDC issuer; default: none
    oidc_provider_arn=ARN
        with eks_cluster: its IAM OIDC provider (required: IAM holds one provider per issuer);
        default: none
    cluster_security_group_id=SG
        with eks_cluster: its cluster security group (the kubectl provider then runs in the VPC);
        default: none
    existing_namespaces=NAMESPACE[,NAMESPACE...]
        with eks_cluster: the specs' namespaces that exist already; used as they are, never created
        or deleted (any other is created, and a deploy fails on one that exists); default: none
    vpc_id=VPC_ID
        an existing VPC, with eks_subnets and hyperpod_subnets; default: a new VPC
    eks_subnets=AZ=SUBNET[,...]
        with vpc_id: the EKS subnets, by AZ name; default: none
    hyperpod_subnets=AZ_ID=SUBNET[,...]
        with vpc_id: the HyperPod subnets, by AZ ID; default: none
    observability=true|false
        false leaves out the observability add-on, AMP workspace, DPD alerts, log alarms and alert
        topic; default: true
    amp_workspace_arn=ARN
        an existing AMP workspace for metrics and alert rules (its Alertmanager routing stays
        yours); default: a new workspace
    observability_log_group=NAME
        the log group holding the inference pods' output, when you ship it yourself; default:
        Container Insights' application group (the stack ships the pods' output there)
    grafana_workspace_id=ID
        an Amazon Managed Grafana workspace (g-...) to import the DPD dashboards into; default: none
    benchmark=true|false
        false leaves out the IAM role and ServiceAccount of hyperpod-dpd bench; default: true
    aggregated_baseline=true|false
        true hosts each endpoint's aggregated twin (<name>-agg) on one more one-node instance group,
        for bench --aggregated; default: false
    allow_internet_facing_load_balancers=true|false
        true lifts the deny on internet-facing load balancers from the ALB controller's and a new
        cluster's roles (a warning follows; see docs/security.md); default: false
    eks_endpoint_access=private|public|CIDR[,CIDR...]
        the EKS API endpoint: private only, public from anywhere, or public from these CIDRs only
        (every call is IAM-authenticated); default: public and private
    network_policies=true|false
        true applies NetworkPolicies around the model pods and turns on the VPC CNI's enforcement
        (unverified on HyperPod nodes); default: false
    eks_creator_admin=true|false
        false gives the cluster's creator no cluster-admin entry (decide before the first deploy: a
        change replaces the cluster); default: true
    kubernetes_version=1.33|1.34
        a new EKS cluster's Kubernetes version; default: 1.34
    eks_support_type=EXTENDED|STANDARD
        a new cluster's upgrade policy (see docs/zero-to-endpoint.md for the cost); default:
        EXTENDED
    inference_addon_version=VERSION
        another inference operator add-on version (a warning says the checks know only the shipped
        CRD); default: the version whose CRD ships in the package
    preinstalled_addons=ADDON[,ADDON...]
        on an existing cluster, prerequisite add-ons it runs already, as EKS add-ons or installed
        otherwise (a Helm cert-manager), named as aws eks list-addons prints them; the stack creates
        none of them (an undeclared self-managed copy fails the deploy; none is adopted); default:
        none
    bundled_load_balancer_controller=true|false
        false on an existing cluster that runs its own AWS Load Balancer Controller: the inference
        add-on then installs none (and the stack creates no role for one); default: true
    bundled_keda=true|false
        false on an existing cluster that runs its own KEDA: the inference add-on then installs
        none; default: true
    weights_staging_hours=HOURS
        how long a deploy waits for a huggingface source to be staged into the model bucket;
        default: 4
    engine_check=true|false
        true also runs each spec's roles through vLLM's own start-up checks, as hyperpod-dpd
        validate --engine does (needs make engine); default: false
.. END generated: context-usage

Every key is checked before anything is built: an unknown key (a typo) or an empty value is an
error, all of them reported together, exit status 2. Nothing is looked up in an AWS account: the
stack synthesizes offline, without credentials.
"""

import sys
from pathlib import Path

from hyperpod_dpd_cdk.app import build, main  # its first import points jsii at the packaged Node.js

__all__ = ["build", "main"]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], cdk_json=Path(__file__).resolve().with_name("cdk.json")))
