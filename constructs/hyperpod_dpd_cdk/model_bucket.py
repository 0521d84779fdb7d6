"""S3 buckets: the model weights bucket, and the hardened defaults every bucket of the stack shares."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from aws_cdk import Annotations, Aws, FeatureFlags, RemovalPolicy, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from hyperpod_dpd import DpdSpec, Problem, S3Source
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd_cdk._private.nag import acknowledge

LOGS_USE_BUCKET_POLICY = "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy"


def secure_bucket(scope: Construct, id: str, *, log_bucket: s3.IBucket | None, log_prefix: str,
                  versioned: bool = True, removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
                  bucket_name: str | None = None, auto_delete_objects: bool = False,
                  object_ownership: s3.ObjectOwnership = s3.ObjectOwnership.BUCKET_OWNER_ENFORCED) -> s3.Bucket:
    """Encrypted, TLS only, no public access, owner-enforced, access-logged into ``log_bucket``."""
    return s3.Bucket(
        scope, id, bucket_name=bucket_name, encryption=s3.BucketEncryption.S3_MANAGED, enforce_ssl=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL, object_ownership=object_ownership,
        versioned=versioned, removal_policy=removal_policy, auto_delete_objects=auto_delete_objects,
        server_access_logs_bucket=log_bucket, server_access_logs_prefix=log_prefix if log_bucket else None)


class AccessLogBucket(Construct):
    """The server access log target of the stack's buckets; retained, like the logs it holds."""

    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        # With the cdk.json flag, log delivery is granted by bucket policy and ACLs stay disabled;
        # without it CDK grants the LogDeliveryWrite ACL, which needs ObjectWriter ownership.
        by_policy = FeatureFlags.of(self).is_enabled(LOGS_USE_BUCKET_POLICY)
        ownership = s3.ObjectOwnership.BUCKET_OWNER_ENFORCED if by_policy else s3.ObjectOwnership.OBJECT_WRITER
        self.bucket = secure_bucket(self, "Resource", log_bucket=None, log_prefix="", object_ownership=ownership)
        acknowledge(self.bucket, "S1",
                    "This is the access log bucket itself; logging it into itself would log its own log writes.")


def spec_bucket_name(specs: Sequence[DpdSpec]) -> str | None:
    """The bucket the S3-sourced specs name (the first one's; :func:`model_bucket_problems` checks they agree)."""
    return next((s.model.source.bucket for s in specs if isinstance(s.model.source, S3Source)), None)


def model_bucket_problems(specs: Sequence[DpdSpec], *, existing_bucket_name: str | None,
                          region: str) -> Iterator[Problem]:
    """The bucket rule: an endpoint reads the bucket its spec names, and that is the stack's one model bucket.

    So every S3 spec of a stack names the same bucket; ``existing_bucket_name`` (``-c model_bucket``)
    says that bucket already exists and must be the same name; a bucket the stack creates is in its region.
    """
    wanted = existing_bucket_name or spec_bucket_name(specs)
    for i, spec in enumerate(specs):
        source = spec.model.source
        if not isinstance(source, S3Source) or source.bucket == wanted:
            continue
        if existing_bucket_name is not None:
            yield Problem(field=f"endpoints[{i}].model.source.s3.bucket", value=source.bucket,
                          message=f"is not the stack's model bucket {existing_bucket_name!r} (-c model_bucket); "
                                  "an endpoint reads the bucket its spec names",
                          fix=f"write bucket: {existing_bucket_name} in the spec, or pass model_bucket="
                              f"{source.bucket!r} (app.py: -c model_bucket={source.bucket})")
        else:
            yield Problem(field=f"endpoints[{i}].model.source.s3.bucket", value=source.bucket,
                          message=f"differs from endpoints[0]'s bucket {wanted!r}; one stack holds one model bucket",
                          fix=f"name {wanted!r} in every spec (each keeps its own prefix), or deploy two stacks")
    if existing_bucket_name is None:
        for i, spec in enumerate(specs):
            source = spec.model.source
            if isinstance(source, S3Source) and source.region not in (None, region) and not Token.is_unresolved(
                    region):
                yield Problem(field=f"endpoints[{i}].model.source.s3.region", value=source.region,
                              message=f"is not the stack's region {region!r}, where the stack creates the bucket",
                              fix=f"set region: {region} (or leave it out), or pass -c model_bucket="
                                  f"{source.bucket} for an existing bucket in {source.region}")


def known_bucket_name(bucket: s3.IBucket) -> str | None:
    """The name of a bucket object as a literal: imported by name, or created with ``bucket_name``; else None."""
    if not Token.is_unresolved(bucket.bucket_name):
        return bucket.bucket_name
    resource = bucket.node.default_child
    if isinstance(resource, s3.CfnBucket) and isinstance(resource.bucket_name, str) and not Token.is_unresolved(
            resource.bucket_name):
        return resource.bucket_name
    return None


class ModelBucket(Construct):
    """Where the model weights live: a new hardened bucket, or an existing one (by name, or a bucket object).

    A new bucket is retained on ``cdk destroy`` (weights take hours to upload) and versioned (an
    overwritten shard can be restored); objects are never auto-deleted.

    :param log_bucket: where a new bucket writes its access logs.
    :param existing_bucket_name: use this bucket instead of creating one. :default: - a new bucket
    :param existing_bucket: use this bucket object instead of creating one (your own ``s3.Bucket``, or one
        imported elsewhere). :default: - a new bucket
    :param bucket_name: the name of a new bucket (the one the specs name). :default: - generated
    """

    def __init__(self, scope: Construct, id: str, *, log_bucket: s3.IBucket,
                 existing_bucket_name: str | None = None, existing_bucket: s3.IBucket | None = None,
                 bucket_name: str | None = None) -> None:
        super().__init__(scope, id)
        self.created = existing_bucket_name is None and existing_bucket is None
        # The name a bucket this construct creates is given (None: CloudFormation generates one).
        self.new_bucket_name = bucket_name if self.created else None
        self.bucket: s3.IBucket
        if existing_bucket is not None:
            self.bucket = existing_bucket
        elif existing_bucket_name is None:
            self.bucket = secure_bucket(self, "Resource", log_bucket=log_bucket, log_prefix="model-bucket/",
                                        bucket_name=bucket_name)
            self._warn_if_example(bucket_name)
        else:
            self.bucket = s3.Bucket.from_bucket_name(self, "Resource", existing_bucket_name)

    def name_new_bucket(self, bucket_name: str) -> None:
        """Name the bucket this construct created without a name (the first endpoint reading S3 came later)."""
        resource = self.bucket.node.default_child
        assert self.created and self.new_bucket_name is None and isinstance(resource, s3.CfnBucket)
        resource.bucket_name = bucket_name
        self.new_bucket_name = bucket_name
        self._warn_if_example(bucket_name)

    def _warn_if_example(self, bucket_name: str | None) -> None:
        if bucket_name is not None and bucket_name == spec_bucket_name([default_spec()]):
            # Synthesizes fine; a deploy would fail on CreateBucket wherever someone else owns the name.
            Annotations.of(self).add_warning_v2(
                "hyperpod-dpd:ExampleBucketName",
                f"the stack would create bucket {bucket_name!r}, the embedded example's name; S3 bucket names "
                "are global, so the deploy fails wherever another account owns it. Fix: name a bucket of your "
                "own in model.source.s3.bucket (or pass an existing one with -c model_bucket=...)")


def grant_bucket_key(bucket: s3.IBucket, role: iam.IRole, *, write: bool = False) -> None:
    """The bucket's KMS key for ``role``, through S3 only: an SSE-KMS bucket's readers need ``kms:Decrypt``, its
    writers ``kms:GenerateDataKey`` too (S3 User Guide, "Using server-side encryption with AWS KMS keys";
    Mountpoint for S3, "IAM permissions"). A bucket without a key (SSE-S3) needs nothing.

    An imported bucket carries its key when imported with it: ``s3.Bucket.from_bucket_attributes(...,
    encryption_key=kms.Key.from_key_arn(...))``.
    """
    key = bucket.encryption_key
    if key is None:
        return
    role.add_to_principal_policy(iam.PolicyStatement(
        actions=["kms:Decrypt", *(["kms:GenerateDataKey"] if write else [])], resources=[key.key_arn],
        conditions={"StringEquals": {"kms:ViaService": f"s3.{Aws.REGION}.{Aws.URL_SUFFIX}"}}))
