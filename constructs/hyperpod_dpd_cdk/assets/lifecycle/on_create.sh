#!/bin/bash
# HyperPod on-create lifecycle script for DPD worker nodes (EKS orchestrator), run as root once per
# node. It moves container images and kubelet data to the EBS volume HyperPod mounts at
# /opt/sagemaker: the vLLM worker image alone is tens of GB and the root volume is small.
# Output goes to /var/log/provision/provisioning.log, which HyperPod ships to CloudWatch.
#
# Amazon Linux 2023 (every EKS AMI from Kubernetes 1.33 on): nodeadm rewrites
# /etc/containerd/config.toml, so containerd gets a config of its own under /opt/sagemaker and a
# systemd drop-in that starts it with that config; the existing data root is copied, because the
# AMI's pause image ("localhost/kubernetes/pause") is only there and cannot be pulled.
#
# HYPERPOD_LIFECYCLE_ROOT prefixes every path the script reads or writes; it is empty on a node
# and a temporary folder in the tests. Paths written into configs are the node's own.
set -euo pipefail

ROOT="${HYPERPOD_LIFECYCLE_ROOT:-}"
DATA_DISK=/opt/sagemaker
CONTAINERD_DIR="$DATA_DISK/containerd"
CONTAINERD_ROOT="$CONTAINERD_DIR/data-root"
CONTAINERD_CONFIG="$CONTAINERD_DIR/config.toml"
KUBELET_DIR="$DATA_DISK/kubelet"
DROP_IN=/etc/systemd/system/containerd.service.d/10-hyperpod-data-root.conf
LOG="$ROOT/var/log/provision/provisioning.log"

mkdir -p "$(dirname "$LOG")"
exec > >(tee -a "$LOG") 2>&1

log() { echo "[on_create] $*"; }

fail() {
  log "ERROR: $*"
  sleep "${HYPERPOD_LIFECYCLE_FAIL_DELAY:-60}"  # let the log reach CloudWatch before the node is marked failed
  exit 1
}

os_version() {
  local release="$ROOT/etc/os-release"
  [ -f "$release" ] || return 0
  # shellcheck source=/dev/null
  (. "$release" && echo "${VERSION_ID:-}")
}

# Amazon Linux 2: the EKS AMI templates containerd's config here, and keeps it.
configure_al2() {
  local config="$ROOT/etc/eks/containerd/containerd-config.toml"
  [ -f "$config" ] || fail "$config not found"
  if grep -q '^[# ]*root *=' "$config"; then
    sed -i "s|^[# ]*root *=.*|root = \"$CONTAINERD_ROOT\"|" "$config"
  else
    sed -i "1i root = \"$CONTAINERD_ROOT\"" "$config"
  fi
  mkdir -p "$ROOT$CONTAINERD_ROOT"
  log "containerd root -> $CONTAINERD_ROOT in ${config#"$ROOT"}"
}

# Amazon Linux 2023: a separate config and a drop-in, which nodeadm leaves alone.
configure_al2023() {
  mkdir -p "$ROOT$CONTAINERD_DIR" "$(dirname "$ROOT$DROP_IN")"
  cat > "$ROOT$CONTAINERD_CONFIG" <<EOF
version = 2
root = "$CONTAINERD_ROOT"
state = "/run/containerd"

[grpc]
address = "/run/containerd/containerd.sock"

[plugins."io.containerd.grpc.v1.cri"]
sandbox_image = "localhost/kubernetes/pause"
enable_cdi = true

[plugins."io.containerd.grpc.v1.cri".containerd]
default_runtime_name = "nvidia"
discard_unpacked_layers = true

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
runtime_type = "io.containerd.runc.v2"
base_runtime_spec = "/etc/containerd/base-runtime-spec.json"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
BinaryName = "/usr/bin/nvidia-container-runtime"
SystemdCgroup = true

[plugins."io.containerd.grpc.v1.cri".registry]
config_path = "/etc/containerd/certs.d:/etc/docker/certs.d"

[plugins."io.containerd.grpc.v1.cri".cni]
bin_dir = "/opt/cni/bin"
conf_dir = "/etc/cni/net.d"
EOF
  cat > "$ROOT$DROP_IN" <<EOF
[Service]
ExecStart=
ExecStart=/usr/bin/containerd --config $CONTAINERD_CONFIG
EOF
  log "containerd config -> $CONTAINERD_CONFIG (drop-in ${DROP_IN})"

  local running=false
  if systemctl is-active --quiet containerd; then
    running=true
    systemctl stop containerd || fail "stopping containerd"
  fi
  # A data root left by an earlier boot of another OS is not compatible: start from the AMI's own.
  rm -rf "$ROOT${CONTAINERD_ROOT:?}"
  if [ -d "$ROOT/var/lib/containerd" ]; then
    cp -a "$ROOT/var/lib/containerd" "$ROOT$CONTAINERD_ROOT" || fail "copying /var/lib/containerd"
    log "copied /var/lib/containerd -> $CONTAINERD_ROOT"
  else
    mkdir -p "$ROOT$CONTAINERD_ROOT"
  fi
  systemctl daemon-reload || fail "reloading systemd"
  if [ "$running" = true ]; then
    systemctl start containerd || fail "starting containerd"
  fi
}

# As AWS's on_create_main.sh does: the link exists whether or not kubelet has written anything yet, so
# kubelet's state never lands on the root volume; a leftover copy from an interrupted run is replaced
# while the original is still there, and kept when it is the only copy.
move_kubelet() {
  if [ -L "$ROOT/var/lib/kubelet" ]; then
    return
  fi
  if [ -d "$ROOT/var/lib/kubelet" ]; then
    rm -rf "$ROOT${KUBELET_DIR:?}"
    mkdir -p "$ROOT$KUBELET_DIR"
    cp -a "$ROOT/var/lib/kubelet/." "$ROOT$KUBELET_DIR"/ || fail "copying /var/lib/kubelet"
    rm -rf "$ROOT/var/lib/kubelet"
  else
    mkdir -p "$ROOT$KUBELET_DIR" "$ROOT/var/lib"
  fi
  ln -s "$KUBELET_DIR" "$ROOT/var/lib/kubelet"
  log "/var/lib/kubelet -> $KUBELET_DIR"
}

log "start $(date -u +%FT%TZ)"

for _ in $(seq 1 "${HYPERPOD_LIFECYCLE_MOUNT_WAIT:-60}"); do
  mountpoint -q "$ROOT$DATA_DISK" && break
  sleep 1
done
if ! mountpoint -q "$ROOT$DATA_DISK"; then
  log "$DATA_DISK is not mounted; keeping containerd and kubelet on the root volume"
  exit 0
fi

version="$(os_version)"
case "$version" in
  2) configure_al2 ;;
  2023) configure_al2023 ;;
  *) log "unsupported OS version '${version}'; leaving containerd where it is" ;;
esac
move_kubelet

if [ "$version" = 2 ]; then
  systemctl daemon-reload || true
  if systemctl is-active --quiet containerd; then
    systemctl restart containerd || fail "restarting containerd"
  fi
fi

log "done $(date -u +%FT%TZ)"
