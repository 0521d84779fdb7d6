"""The result files the benchmark Job uploaded, read back from S3 in preference to the copy in its log.

The ``publish`` container prints every result file into its log and uploads the same files under
``<results>/<endpoint>/<run id>/``. The log cannot be relied on for large files: a level's file
holds about 1.1 KB per request (11 MB at concurrency 1,024 x 10 requests), kubelet rotates a
container's log past ``containerLogMaxSize`` (10 MiB by default on EKS), and the log API serves
only the current file, so early files go missing or end mid-JSON. The uploaded copy is whole.

So when the Job uploaded (an upload location was set and the publish container did not report
:data:`~hyperpod_dpd.benchmark.run.job.UPLOAD_FAILED`), ``bench`` reads every object directly in the
run's folder, by base name and whatever its extension (sub-folders skipped, binary files such as
genai-bench's ``.xlsx`` summary left out), and each one wins over the log's copy of that name; the
log still supplies names the folder lacks. Only the objects the run's own manifest
(:data:`~hyperpod_dpd.benchmark.run.job.UPLOAD_MANIFEST`, uploaded with them) names are read: an earlier
run under the same run id leaves objects this run did not overwrite, which are ignored with a note.
When S3 cannot be read (no credentials, access denied, no such bucket, an empty folder), the log's
copy is used and a one-line note says why. The read uses the credentials of whoever runs ``bench``
(not the pod's role): they need ``s3:ListBucket`` on the bucket for that prefix and ``s3:GetObject``
on its objects.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from hyperpod_dpd.benchmark.run.job import UPLOAD_FAILED, UPLOAD_MANIFEST, results_folder
from hyperpod_dpd.benchmark.run.target import S3Location
from hyperpod_dpd.clients.aws import AWS_ERRORS, AwsUnavailable, describe_error
from hyperpod_dpd.errors import DpdError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from hyperpod_dpd.benchmark.run.cluster import JobLog


class UploadedUnreadable(DpdError):
    """The uploaded folder could not be read; the message says why and what permission to grant."""


# What ends a read: S3's refusals, no usable credentials or region, a client that could not be made.
UNREADABLE: tuple[type[Exception], ...] = (UploadedUnreadable, AwsUnavailable, *AWS_ERRORS)


def _key_prefix(folder: S3Location) -> str:
    prefix = folder.prefix.strip("/")
    return f"{prefix}/" if prefix else ""


def read_uploaded(s3: S3Client, folder: S3Location) -> dict[str, str]:
    """Every text object directly in ``folder``, by base name; :class:`UploadedUnreadable` when S3 refuses."""
    prefix = _key_prefix(folder)
    keys: list[str] = []
    try:
        # The delimiter leaves sub-folders out (as CommonPrefixes): only the run folder's own files.
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=folder.bucket, Prefix=prefix, Delimiter="/"):
            keys += [item["Key"] for item in page.get("Contents", []) if item["Key"] != prefix]
    except AWS_ERRORS as err:
        raise UploadedUnreadable(describe_error(
            err, permission=f"s3:ListBucket on bucket {folder.bucket} for the prefix {prefix}")) from None
    files: dict[str, str] = {}
    for key in keys:
        try:
            body = s3.get_object(Bucket=folder.bucket, Key=key)["Body"].read()
        except AWS_ERRORS as err:
            raise UploadedUnreadable(describe_error(
                err, permission=f"s3:GetObject on s3://{folder.bucket}/{prefix}*")) from None
        try:
            files[key.removeprefix(prefix)] = body.decode("utf-8")
        except UnicodeDecodeError:
            continue  # a binary report (genai-bench's .xlsx summary): nothing bench reads
    return files


def unreadable_reason(err: Exception) -> str:
    """One line for an :data:`UNREADABLE` error: its own message, else what S3 or botocore said."""
    return str(err) if isinstance(err, UploadedUnreadable | AwsUnavailable) else describe_error(err)


def uploaded_folder(log: JobLog, *, results: S3Location | None, endpoint: str, run_id: str) -> S3Location | None:
    """The run's S3 folder when the Job uploaded into it: an upload was asked, and the publish container finished
    without :data:`~hyperpod_dpd.benchmark.run.job.UPLOAD_FAILED`; else None."""
    if results is None or log.exit_code is None or log.exit_code == UPLOAD_FAILED:
        return None
    return results_folder(results, endpoint, run_id)


def write_uploaded(s3: S3Client, folder: S3Location, name: str, text: str) -> None:
    """``text`` as the object ``name`` in ``folder``, beside the Job's files; :class:`UploadedUnreadable` (naming
    the permission) when S3 refuses."""
    key = f"{_key_prefix(folder)}{name}"
    try:
        s3.put_object(Bucket=folder.bucket, Key=key, Body=text.encode("utf-8"), ContentType="application/json")
    except AWS_ERRORS as err:
        raise UploadedUnreadable(describe_error(
            err, permission=f"s3:PutObject on s3://{folder.bucket}/{key}")) from None


def result_files(log: JobLog, *, results: S3Location | None, endpoint: str, run_id: str,
                 s3: Callable[[str | None], S3Client], note: Callable[[str], None]) -> Mapping[str, str]:
    """The Job's result files by name: the uploaded copy of each over the log's, or the log's alone when
    nothing was uploaded or S3 cannot be read (then ``note`` says why).

    :param s3: ``s3(region)``, an S3 client for the bucket's region; only called when the Job uploaded.
    """
    folder = uploaded_folder(log, results=results, endpoint=endpoint, run_id=run_id)
    if folder is None:
        return log.files  # no upload asked, the publish container never finished, or its upload failed
    try:
        uploaded = read_uploaded(s3(folder.region), folder)
    except UNREADABLE as err:
        reason = unreadable_reason(err)
        note(f"cannot read the uploaded results in {folder.uri} ({reason}); using the copy in the Job's log, "
             "which kubelet's log rotation may have cut")
        return log.files
    if not uploaded:
        note(f"no result files in {folder.uri}; using the copy in the Job's log")
        return log.files
    if UPLOAD_MANIFEST not in uploaded:
        note(f"{folder.uri} holds no {UPLOAD_MANIFEST} naming this run's files, so its objects may be an earlier "
             "run's under the same run id; using the copy in the Job's log")
        return log.files
    listed = manifest_names(uploaded[UPLOAD_MANIFEST])
    stale = sorted(name for name in uploaded if name not in listed and name != UPLOAD_MANIFEST)
    if stale:
        note(f"ignored {len(stale)} object(s) in {folder.uri} that this run did not upload ({_names(stale)}): an "
             "earlier run's under the same --run-id")
    return {**log.files, **{name: text for name, text in uploaded.items()
                            if name in listed and (_whole(text, name) or not _whole(log.files.get(name), name))}}


def manifest_names(text: str) -> set[str]:
    """The file names an upload manifest lists, one a line."""
    return {line.strip() for line in text.splitlines() if line.strip()}


def _names(names: list[str]) -> str:
    return f"{', '.join(names[:5])}{', ...' if len(names) > 5 else ''}"


def own_files(files: Mapping[str, str], *, keep: tuple[str, ...] = ()) -> tuple[dict[str, str], str | None]:
    """A results folder's files as its run uploaded them: when the folder holds the run's
    :data:`~hyperpod_dpd.benchmark.run.job.UPLOAD_MANIFEST` (a folder copied down from S3), the files it lists and
    ``keep`` (files written beside the upload afterwards, such as the counters), with a note naming every other
    file, ignored (an earlier run's under the same run id, or one added since); else ``files`` as they are (None)."""
    text = files.get(UPLOAD_MANIFEST)
    if text is None:
        return dict(files), None
    listed = manifest_names(text) | set(keep)
    ignored = sorted(name for name in files if name not in listed and name != UPLOAD_MANIFEST)
    own = {name: body for name, body in files.items() if name in listed}
    if not ignored:
        return own, None
    return own, (f"ignored {len(ignored)} file(s) that its {UPLOAD_MANIFEST} does not name as the run's "
                 f"({_names(ignored)}): an earlier run's under the same --run-id, or added since")


def _whole(text: str | None, name: str) -> bool:
    """Whether a JSON result file's copy parses (a ``.jsonl`` or other file is taken as it is)."""
    if text is None:
        return False
    if not name.endswith(".json"):
        return True
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
