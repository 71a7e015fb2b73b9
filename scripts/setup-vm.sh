#!/usr/bin/env bash
# Installs what `bob --kernel debian:6.1|debian:6.12|uml:6.1|uml:6.12|uml:7.2|IMAGE` needs
# to boot another kernel: qemu (emulation works everywhere; KVM where the host allows it),
# the static busybox and kmod that virtme-ng's init and module setup use (kmod also loads
# a user-mode Linux guest's modules), gcc (bob builds a small preload library that UML
# kernels before 7.0 need on CPUs with AVX-512 or AMX: docs/vm.md), patchelf (which lets
# a user-mode Linux kernel built against a newer glibc start here, beside its suite's
# libc6), the mkfs/fsck of the file systems only other kernels have (f2fs, nilfs2, jfs,
# reiserfs), and virtme-ng itself (pinned) in a virtual environment at /opt/bob-vm-venv,
# where bob looks for `vng`.
# Kernels are not installed here: bob fetches Debian's packages into its kernel cache on
# first use (~/.cache/bob/kernels). Idempotent; needs root.
set -euo pipefail
VNG_VERSION=1.42
VENV=${BOB_VM_VENV:-/opt/bob-vm-venv}

need=()
for pair in qemu-system-x86_64:qemu-system-x86 busybox:busybox-static depmod:kmod patchelf:patchelf \
            mkfs.f2fs:f2fs-tools mkfs.nilfs2:nilfs-tools mkfs.jfs:jfsutils \
            mkfs.reiserfs:reiserfsprogs dmsetup:dmsetup cc:gcc; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "setup-vm: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ ! -x "$VENV/bin/vng" ] || ! "$VENV/bin/vng" --version 2>/dev/null | grep -q "$VNG_VERSION"; then
  echo "setup-vm: installing virtme-ng $VNG_VERSION in $VENV"
  if ! python3 -m venv "$VENV" 2>/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
    /usr/bin/python3 -m venv "$VENV"
  fi
  "$VENV/bin/pip" install -q "virtme-ng==$VNG_VERSION"
fi
