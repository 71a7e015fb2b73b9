#!/usr/bin/env bash
# Real xfstests on another kernel: fetches xfstests' source into a cache outside the
# repository, installs its Debian build dependencies, builds it, and runs `./check` on the
# named tests in a virtual machine (virtme-ng, as bob's `--kernel` does) whose TEST_DEV,
# SCRATCH_DEV and LOGWRITES_DEV are loop devices over files in the guest's memory.
# Device-mapper targets (dm-log-writes) exist there even where the host has none.
#
#   scripts/xfstests.sh build
#   scripts/xfstests.sh run [--kernel debian:6.12|debian:6.1|IMAGE] [--fs xfs|ext4|f2fs|btrfs]
#        [--add FILE]... [--modules-from DIR] [--results DIR] [--freeze-clock]
#        [--mount-options OPTS] [--mkfs-options OPTS] TEST...
#
# --kernel also takes a User-mode Linux kernel (a `linux` program, e.g. one that
# scripts/build-kernel.sh built): it runs with no emulation, at about the host's speed.
# `--add FILE` copies a test (e.g. one `bob explore --export-xfstests` wrote, with its
# .out beside it) into the guest's copy of the suite before `./check` runs it: a FILE
# named DIR-NAME (ext4-309) as tests/DIR/NAME, any other as tests/generic/NAME. `--modules-from DIR` loads the .ko files in DIR with insmod before
# anything else (a patched module of the guest's kernel: see docs/findings/). The
# --freeze-clock keeps setting the guest's wall clock back to one instant while check
# runs, so that every file timestamp is that instant: a finding that needs two writes in
# one tick of the coarse clock then needs no luck (the guest only; its clock is its own).
# `--mount-options OPTS` sets xfstests' MOUNT_OPTIONS ("-o OPTS") for every mount of the
# test and scratch file systems (e.g. ext4's journal_async_commit), `--mkfs-options OPTS`
# its MKFS_OPTIONS for the scratch file system (e.g. "-O ^metadata_csum").
# The results (check's output, .full and .out.bad files) are written below --results
# (default /var/tmp/bob-xfstests-results/KERNEL-FS, created), which the guest shares.
#
# Environment: XFSTESTS_CACHE (default /opt/xfstests), XFSTESTS_GIT (the source's git
# URL or path; default git.kernel.org's xfstests-dev), BOB_KERNEL_CACHE (default
# ~/.cache/bob/kernels, where bob keeps Debian's kernels), BOB_VNG, VM_ACCEL (tcg|kvm,
# default tcg: Debian's kernels do not boot under this project's nested KVM).
set -euo pipefail

CACHE=${XFSTESTS_CACHE:-/opt/xfstests}
GIT=${XFSTESTS_GIT:-https://git.kernel.org/pub/scm/fs/xfs/xfstests-dev.git}
KCACHE=${BOB_KERNEL_CACHE:-$HOME/.cache/bob/kernels}
VNG=${BOB_VNG:-/opt/bob-vm-venv/bin/vng}
SRC=$CACHE/xfstests-dev

die() { echo "xfstests.sh: $*" >&2; exit 2; }

build() {
  mkdir -p "$CACHE"
  local deps=(git make gcc autoconf automake libtool libtool-bin pkg-config gawk bc
    xfsprogs xfslibs-dev e2fsprogs uuid-dev uuid-runtime libattr1-dev libacl1-dev attr acl
    libaio-dev liburing-dev libgdbm-dev libcap-dev psmisc quota dmsetup xfsdump)
  local missing=()
  for d in "${deps[@]}"; do
    dpkg-query -W -f='${Status}' "$d" 2>/dev/null | grep -q "install ok installed" || missing+=("$d")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "xfstests.sh: installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null || {
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
    }
  fi
  if [ ! -d "$SRC/.git" ]; then
    git clone -q "$GIT" "$SRC"
  fi
  echo "xfstests.sh: building $(git -C "$SRC" log -1 --format='%h %s') in $SRC"
  make -C "$SRC" -j"$(nproc)" >"$CACHE/build.log" 2>&1 || {
    tail -30 "$CACHE/build.log"
    die "build failed (log: $CACHE/build.log)"
  }
  [ -x "$SRC/src/log-writes/replay-log" ] || die "replay-log was not built"
  echo "xfstests.sh: built; replay-log is $SRC/src/log-writes/replay-log"
}

# The kernel image of a spec: Debian's package unpacked into bob's kernel cache (fetched
# as bob does, with apt-get download, when missing), or an image path as given.
kernel_image() {
  local spec=$1 meta pkg dir
  case "$spec" in
    debian:6.12) meta=linux-image-6.12-amd64 ;;
    debian:6.1) meta=linux-image-amd64 ;;
    *) [ -f "$spec" ] || die "no kernel image $spec"; echo "$spec"; return ;;
  esac
  pkg=$(apt-cache depends "$meta" 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
  [ -n "$pkg" ] || pkg=$(ls "$KCACHE" 2>/dev/null | grep "^linux-image-${spec#debian:}" | sort -V | tail -1)
  [ -n "$pkg" ] || die "cannot name the package of $spec"
  dir=$KCACHE/$pkg
  if [ ! -d "$dir/boot" ]; then
    local tmp
    tmp=$(mktemp -d)
    (cd "$tmp" && apt-get download -qq "$pkg" >/dev/null) || die "apt-get download $pkg failed"
    mkdir -p "$KCACHE"
    dpkg-deb -x "$tmp"/*.deb "$tmp/unpacked"
    mv "$tmp/unpacked" "$dir"
    rm -rf "$tmp"
  fi
  ls "$dir"/boot/vmlinuz-* | head -1
}

run() {
  local spec=debian:6.12 fs=xfs results="" mods="" freeze="" mopts="" kopts="" adds=() tests=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --kernel) spec=$2; shift 2 ;;
      --fs) fs=$2; shift 2 ;;
      --add) adds+=("$(realpath "$2")"); shift 2 ;;
      --results) results=$2; shift 2 ;;
      --modules-from) mods=$(realpath "$2"); shift 2 ;;
      --freeze-clock) freeze=1; shift ;;
      --mount-options) mopts=$2; shift 2 ;;
      --mkfs-options) kopts=$2; shift 2 ;;
      -*) die "unknown option $1" ;;
      *) tests+=("$1"); shift ;;
    esac
  done
  [ ${#tests[@]} -gt 0 ] || die "name the tests to run (e.g. generic/482)"
  [ -x "$SRC/check" ] && [ -x "$SRC/src/log-writes/replay-log" ] || die "run '$0 build' first"
  [ -x "$VNG" ] || die "no virtme-ng at $VNG (scripts/setup-vm.sh installs it)"
  local image
  image=$(kernel_image "$spec")
  results=${results:-/var/tmp/bob-xfstests-results/$(echo "$spec" | tr ':/' '--')-$fs}
  mkdir -p "$results"
  results=$(realpath "$results")
  local mkfs_test
  case "$fs" in
    xfs) mkfs_test="mkfs.xfs -f -q" ;;
    ext4) mkfs_test="mkfs.ext4 -F -q" ;;
    f2fs) mkfs_test="mkfs.f2fs -f -q" ;;
    btrfs) mkfs_test="mkfs.btrfs -f -q" ;;
    *) die "--fs is xfs, ext4, f2fs or btrfs" ;;
  esac
  # The guest sees the host's root read-only: the suite gets a writable overlay in the
  # guest's memory (a copy where overlayfs is missing), where check may write beside
  # itself and the tests to add are put in place.
  if [ -n "$freeze" ]; then
    printf '%s\n' '#include <time.h>' \
      'int main(void) { struct timespec t; clock_gettime(CLOCK_REALTIME, &t);' \
      '  for (;;) clock_settime(CLOCK_REALTIME, &t); }' > "$results/freeze-clock.c"
    cc -O2 -o "$results/freeze-clock" "$results/freeze-clock.c"
  fi
  local guest=$results/guest.sh
  {
    echo "set -u"
    echo "exec > $results/check.log 2>&1"
    echo "uname -r"
    if [ -n "$mods" ]; then
      # A module's dependencies come from the kernel's own modules first.
      echo "for m in $mods/*.ko; do for d in \$(modinfo -F depends \$m | tr , ' '); do modprobe \$d; done; echo \"insmod \$m\"; insmod \$m || exit 3; done"
    fi
    echo "for m in loop dm-mod dm-log-writes dm-thin-pool xfs ext4 f2fs btrfs; do modprobe \$m; done"
    echo "W=\${XFST_WORK:-/var/tmp/xfst}; mkdir -p \$W/test \$W/scratch \$W/suite \$W/upper \$W/work"
    echo "modprobe overlay"
    echo "mount -t overlay overlay -o lowerdir=$SRC,upperdir=\$W/upper,workdir=\$W/work \$W/suite || cp -a $SRC/. \$W/suite"
    local dirs=() a dir name
    # The tests to add go through the results directory, which every guest shares (a
    # UML guest's /tmp is its own).
    mkdir -p "$results/add"
    for a in ${adds[@]+"${adds[@]}"}; do
      cp "$a" "$results/add/"; [ -f "$a.out" ] && cp "$a.out" "$results/add/"
      a=$results/add/$(basename "$a")
      # FILE named DIR-NAME (ext4-309) goes to tests/DIR/NAME, any other to tests/generic.
      name=$(basename "$a"); dir=generic
      case "$name" in
        *-*) [ -d "$SRC/tests/${name%%-*}" ] && { dir=${name%%-*}; name=${name#*-}; } ;;
      esac
      echo "cp $a \$W/suite/tests/$dir/$name && chmod +x \$W/suite/tests/$dir/$name"
      [ -f "$a.out" ] && echo "cp $a.out \$W/suite/tests/$dir/$name.out"
      case " ${dirs[*]-} " in *" $dir "*) ;; *) dirs+=("$dir") ;; esac
    done
    for dir in ${dirs[@]+"${dirs[@]}"}; do
      echo "(cd \$W/suite/tests/$dir && ../../tools/mkgroupfile > group.list)"
    done
    echo "for d in test scratch log; do truncate -s 2G \$W/\$d.img; done"
    echo "TD=\$(losetup -f --show \$W/test.img); SD=\$(losetup -f --show \$W/scratch.img); LD=\$(losetup -f --show \$W/log.img)"
    echo "$mkfs_test \$TD"
    echo "cat > \$W/suite/local.config <<EOF
export FSTYP=$fs
export TEST_DEV=\$TD
export TEST_DIR=\$W/test
export SCRATCH_DEV=\$SD
export SCRATCH_MNT=\$W/scratch
export LOGWRITES_DEV=\$LD
export RESULT_BASE=$results/results
${mopts:+export MOUNT_OPTIONS=\"-o $mopts\"}
${kopts:+export MKFS_OPTIONS=\"$kopts\"}
EOF"
    [ -n "$freeze" ] && echo "$results/freeze-clock & FREEZE=\$!"
    echo "cd \$W/suite && ./check ${tests[*]}"
    echo "echo \$? > $results/check.rc"
    [ -n "$freeze" ] && echo "kill \$FREEZE"
    echo "cp -a $results/results/. $results/results-copy 2>/dev/null; sync"
  } >"$guest"
  rm -f "$results/check.rc"
  if is_uml "$image"; then
    run_uml "$image" "$guest" "$results"
  else
    run_qemu "$image" "$guest" "$results"
  fi
  cat "$results/check.log" 2>/dev/null || true
  [ -f "$results/check.rc" ] || die "the guest ended before check did (console: $results/console.log)"
  return "$(cat "$results/check.rc")"
}

# A User-mode Linux kernel is an ELF program; a bzImage is not.
is_uml() { [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]; }

run_qemu() {
  local image=$1 guest=$2 results=$3
  local accel=()
  [ "${VM_ACCEL:-tcg}" = tcg ] && accel=(--disable-kvm)
  echo "xfstests.sh: ./check ${tests[*]} on $fs under $(basename "$image") (results in $results)"
  # vng runs virtme-run, which lives beside it.
  PATH=$(dirname "$VNG"):$PATH "$VNG" --run "$image" ${accel[@]+"${accel[@]}"} --cpus 2 --memory 4G \
    --rwdir="$results" --append oops=panic --exec "sh $guest" >"$results/console.log" 2>&1 || true
}

# A UML kernel (scripts/build-kernel.sh builds one with every target built in) runs as a
# program of this machine, no emulation: its own init (PID 1) mounts what a system has
# over the host's root, shared read-only through hostfs, puts the work files on a tmpfs
# in the guest's memory, shares the results directory read-write, runs the guest script
# and powers off. udevd runs in the guest: fstests waits for it to announce each
# device-mapper device.
run_uml() {
  local image=$1 guest=$2 results=$3
  local umldir=$results/uml
  rm -rf "$umldir"; mkdir -p "$umldir"
  cat >"$umldir/init.sh" <<EOF
#!/bin/sh
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t hostfs -o $results none $results
# fstests waits for udev to announce each device-mapper device (udevadm wait/settle).
for u in /lib/systemd/systemd-udevd /usr/lib/systemd/systemd-udevd; do
  [ -x \$u ] && { \$u --daemon; break; }
done
export XFST_WORK=/run/xfst
sh $guest
poweroff -f 2>/dev/null || halt -f
EOF
  chmod +x "$umldir/init.sh"
  echo "xfstests.sh: booting the user-mode Linux kernel $image"
  timeout "${XFSTESTS_UML_TIMEOUT:-3600}" "$image" mem="${XFSTESTS_UML_MEM:-3G}" \
    rootfstype=hostfs rootflags=/ ro init="$umldir/init.sh" con=null con0=null,fd:1 \
    ssl=null uml_dir="$umldir" oops=panic panic=-1 \
    >"$results/console.log" 2>&1 </dev/null || true
}

case "${1:-}" in
  build) shift; build "$@" ;;
  run) shift; run "$@" ;;
  *) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
