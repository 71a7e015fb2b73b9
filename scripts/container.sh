#!/usr/bin/env bash
# bob's container image on a machine that reaches no container registry (docs/container.md):
# the base image is made from Debian's mirror, the image holds a bob built on the host, and
# the Kubernetes Job's pod template is played by podman. As root; needs podman (with runc),
# mmdebstrap and python3.
#
#   scripts/container.sh base                  make localhost/bob-base:bookworm (cached)
#   scripts/container.sh build [BOB]           build localhost/bob:latest with the binary
#                                              BOB (default target/release/bob)
#   scripts/container.sh run [-OPTION... --] COMMAND...
#                                              COMMAND in a privileged container with the
#                                              host's /dev and the current directory (at
#                                              its own path); OPTIONs go to podman run
#   scripts/container.sh pod FILE [INDEX] [NAME=VALUE...]
#                                              print the Pod FILE runs: a Pod, or the pod
#                                              of an Indexed Job's index INDEX; env NAME
#                                              set to VALUE
#   scripts/container.sh play FILE [INDEX] [NAME=VALUE...]
#                                              play that Pod (podman kube play), wait for
#                                              it, print its log, remove it; exits as the
#                                              pod's container did
#   scripts/container.sh validate FILE...      validate Kubernetes manifests against the
#                                              Kubernetes schema (kubernetes-validate)
#
# Environment: BOB_CONTAINER_CACHE (default ~/.cache/bob/container) keeps the base image's
# tarball and the validator between runs; DEBIAN_MIRROR (default http://deb.debian.org/debian);
# CONTAINERS_CONF (default scripts/containers.conf beside this script).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
cache=${BOB_CONTAINER_CACHE:-$HOME/.cache/bob/container}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/containers.conf}
BASE=localhost/bob-base:bookworm
IMAGE=localhost/bob:latest
# The validator, pinned; its venv's python also has PyYAML, for reading the Job.
VALIDATOR=kubernetes-validate==1.37.0

# Scratch files, and what to undo when the script ends however it ends.
tmp=$(mktemp -d)
undo=()
finish() {
  for u in "${undo[@]}"; do eval "$u" || true; done
  rm -rf "$tmp"
}
trap finish EXIT

die() {
  echo "container.sh: $*" >&2
  exit 2
}

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

need() {
  for p in "$@"; do
    command -v "$p" >/dev/null 2>&1 || die "$p not found (Debian: apt-get install $p)"
  done
}

# The base: Debian bookworm, apt and the essential packages (what bookworm-slim holds),
# from the mirror. The tarball is kept: mmdebstrap takes about 70 s, the import 5 s.
base() {
  need podman mmdebstrap
  if podman image exists "$BASE"; then
    return
  fi
  local tar=$cache/bookworm-apt.tar
  if [ ! -s "$tar" ]; then
    mkdir -p "$cache"
    echo "container.sh: making $tar from $mirror (mmdebstrap)" >&2
    mmdebstrap --quiet --variant=apt --format=tar bookworm "$tar.part" \
      "deb $mirror bookworm main" \
      "deb $mirror bookworm-updates main" \
      "deb ${mirror%/debian}/debian-security bookworm-security main"
    mv "$tar.part" "$tar"
  fi
  podman import --quiet \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' "$tar" "$BASE" >/dev/null
}

# The image, from the Containerfile's host stage: only the binary goes into the context.
build() {
  local bob=${1:-$root/target/release/bob}
  [ -x "$bob" ] || die "$bob: no bob binary there (cargo build --release -p bob-cli)"
  base
  local ctx=$tmp/context old new
  mkdir "$ctx"
  cp "$bob" "$ctx/bob"
  old=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
  new=$(podman build --quiet --pull=never --network host --target host \
    --build-arg BASE="$BASE" --build-arg BOB_BIN=bob \
    -f "$root/Containerfile" -t "$IMAGE" "$ctx")
  # The image this one replaced (another bob) would stay behind untagged.
  if [ -n "$old" ] && [ "$old" != "$new" ]; then
    podman rmi "$old" >/dev/null 2>&1 || true
  fi
}

run() {
  # podman options first, up to `--`; the command is the rest (and may hold a `--` of
  # its own, as `bob record ... -- COMMAND` does).
  local opts=()
  if [ "${1:0:1}" = - ]; then
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
      opts+=("$1")
      shift
    done
    [ $# -gt 0 ] || usage
    shift
  fi
  [ $# -gt 0 ] || usage
  podman run --rm --privileged --network none -v /dev:/dev -v "$PWD:$PWD" -w "$PWD" "${opts[@]}" \
    "$IMAGE" "$@"
}

# The venv holding the validator (and PyYAML), installed from PyPI once.
tools() {
  local venv=$cache/tools
  if [ ! -x "$venv/bin/kubernetes-validate" ]; then
    need python3
    mkdir -p "$cache"
    python3 -m venv "$venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$venv/bin/pip" install --quiet "$VALIDATOR" || die "pip install $VALIDATOR failed"
  fi
  echo "$venv"
}

# The Pod FILE runs: a Pod as it is; for an Indexed Job, the Pod its controller makes for
# index INDEX (the Job's pod template, named JOB-INDEX, JOB_COMPLETION_INDEX set as
# Kubernetes sets it). NAME=VALUE changes an environment variable the pod already sets.
# Other documents in FILE (the Job's claim) are not pods: podman plays the claim as the
# named volume of the same name, made when a pod first mounts it.
pod() {
  [ $# -ge 1 ] || usage
  local venv
  venv=$(tools)
  "$venv/bin/python" - "$@" <<'EOF'
import sys, yaml
def fail(what):
    print(f"container.sh: {what}", file=sys.stderr)
    sys.exit(2)
path, rest = sys.argv[1], sys.argv[2:]
try:
    docs = [d for d in yaml.safe_load_all(open(path)) if isinstance(d, dict)]
except (OSError, yaml.YAMLError) as e:
    fail(f"{path}: {type(e).__name__}: {e}")
runs = [d for d in docs if d.get("kind") in ("Job", "Pod")]
if len(runs) != 1:
    fail(f"{path}: holds {len(runs)} Jobs and Pods, not one")
doc = runs[0]
if doc["kind"] == "Pod":
    pod, sets = doc, rest
else:
    spec = doc.get("spec") or {}
    if spec.get("completionMode") != "Indexed":
        fail(f"{path}: the Job is not Indexed")
    if not rest or not rest[0].isdigit() or int(rest[0]) >= int(spec.get("completions", 1)):
        fail(f"{path}: give an index below its {spec.get('completions', 1)} completions")
    index, sets = rest[0], rest[1:]
    template = spec["template"]
    meta = dict(template.get("metadata") or {})
    meta["name"] = f"{doc['metadata']['name']}-{index}"
    meta["annotations"] = dict(meta.get("annotations") or {})
    meta["annotations"]["batch.kubernetes.io/job-completion-index"] = index
    for c in template["spec"]["containers"]:
        env = [e for e in c.get("env", []) if e["name"] != "JOB_COMPLETION_INDEX"]
        c["env"] = env + [{"name": "JOB_COMPLETION_INDEX", "value": index}]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]}
for s in sets:
    k, sep, v = s.partition("=")
    if not sep:
        fail(f"{s}: not NAME=VALUE")
    for c in pod["spec"]["containers"]:
        env = c.get("env", [])
        if not any(e["name"] == k for e in env):
            fail(f"{s}: {path} sets no {k} in container {c['name']}")
        c["env"] = [e for e in env if e["name"] != k] + [{"name": k, "value": v}]
yaml.safe_dump(pod, sys.stdout, sort_keys=False)
EOF
}

play() {
  [ $# -ge 1 ] || usage
  local file=$tmp/pod.yaml name containers code
  pod "$@" >"$file"
  name=$(sed -n 's/^  name: //p' "$file" | head -1)
  undo+=("podman kube play --down '$file' >/dev/null 2>&1")
  # The named volume of each claim the pod mounts, made here rather than by kube play:
  # two pods of one Job played at once would both try to make it, and one would fail.
  local claim
  for claim in $(sed -n 's/^ *claimName: *//p' "$file" | tr -d "\"'"); do
    podman volume exists "$claim" || podman volume create "$claim" >/dev/null 2>&1 \
      || podman volume exists "$claim" || die "cannot make the volume $claim"
  done
  podman kube play --quiet --network none "$file" >/dev/null
  containers=$(podman pod inspect "$name" --format '{{range .Containers}}{{.Name}} {{end}}')
  code=0
  for c in $containers; do
    # The pod's infra container holds its namespaces; the others are the template's.
    [[ "$c" != *-infra ]] || continue
    local rc
    rc=$(podman wait "$c")
    podman logs "$c"
    [ "$rc" -eq 0 ] || code=$rc
  done
  return "$code"
}

validate() {
  [ $# -ge 1 ] || usage
  local venv
  venv=$(tools)
  "$venv/bin/kubernetes-validate" --strict "$@"
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case "$cmd" in
  base | build | run | pod | play | validate) "$cmd" "$@" ;;
  *) usage ;;
esac
