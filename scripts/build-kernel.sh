#!/usr/bin/env bash
# Builds a User-mode Linux kernel (ARCH=um) from source for bob: one `linux` binary that
# boots with the host's root shared read-only through hostfs and has every file system,
# loop, md and device-mapper target bob uses built in (=y, no modules). See
# docs/kernel-build.md.
#
#   build-kernel.sh --debian 6.1.176-1            # Debian's `linux` source package, that version
#   build-kernel.sh --tree ~/linux                # an unpacked source tree (built out of tree)
#   build-kernel.sh --tree ~/linux.git --rev v4.16 # a git repository: REV is exported first
#   build-kernel.sh --tree ~/x.git --rev HEAD --subdir linux-3.13.10 # the tree is a subdirectory
#   options: --out DIR   (default ${BOB_KERNEL_CACHE:-~/.cache/bob/kernels}/built-uml-RELEASE)
#            -j N        (default nproc)   --cc gcc-10 (compiler; installed if missing)
#
# Writes OUT/linux (stripped), OUT/config, OUT/release, OUT/build.log, OUT/build-info and
# prints the binary's path as the last line of stdout; everything else goes to stderr.
# A second run with the same release and configuration finds OUT/linux and builds nothing.
# Sources and build trees live in the cache: src/ (unpacked sources), work/ (object trees,
# kept so that a failed or repeated build continues incrementally), apt/ (a private apt
# configuration with deb-src lines, built from the machine's own apt sources).
# Needs root only to install missing build tools with apt-get.
set -euo pipefail

CACHE=${BOB_KERNEL_CACHE:-$HOME/.cache/bob/kernels}
TREE= REV= SUBDIR= DEBIAN= OUT= JOBS=$(nproc) CCOPT=
START=$(date +%s)

log() { printf 'build-kernel: %s\n' "$*" >&2; }
die() { printf 'build-kernel: error: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }

while [ $# -gt 0 ]; do
  case $1 in
    --tree) TREE=${2:?}; shift 2 ;;
    --rev) REV=${2:?}; shift 2 ;;
    --subdir) SUBDIR=${2:?}; shift 2 ;;
    --debian) DEBIAN=${2:?}; shift 2 ;;
    --out) OUT=${2:?}; shift 2 ;;
    -j) JOBS=${2:?}; shift 2 ;;
    -j*) JOBS=${1#-j}; shift ;;
    --cc) CCOPT=${2:?}; shift 2 ;;
    -h|--help) usage 0 ;;
    *) log "unknown argument: $1"; usage ;;
  esac
done
[ -n "$TREE" ] || [ -n "$DEBIAN" ] || { log "give --tree DIR or --debian VERSION"; usage; }
[ -n "$TREE" ] && [ -n "$DEBIAN" ] && die "--tree and --debian exclude each other"
[ -n "$REV" ] && [ -z "$TREE" ] && die "--rev needs --tree (a git repository)"
[ -n "$SUBDIR" ] && [ -z "$REV" ] && die "--subdir needs --rev (it names a directory of REV)"
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)

# --- build tools (idempotent, like scripts/setup-vm.sh) ---------------------------------
APT_UPDATED=
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  local out; out=$(mktemp)
  if [ -z "$APT_UPDATED" ]; then apt-get update -qq >"$out" 2>&1 || { cat "$out" >&2; rm -f "$out"; return 1; }; APT_UPDATED=1; fi
  apt-get install -y -qq "$@" >"$out" 2>&1 || { cat "$out" >&2; rm -f "$out"; return 1; }
  rm -f "$out"
}
need=()
for pair in make:make gcc:gcc bc:bc bison:bison flex:flex perl:perl xz:xz-utils \
            strip:binutils sha256sum:coreutils; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
[ -e /usr/include/libelf.h ] || need+=(libelf-dev)
[ -e /usr/include/openssl/ssl.h ] || need+=(libssl-dev)
[ -n "$DEBIAN" ] && { command -v dpkg-source >/dev/null 2>&1 || need+=(dpkg-dev); }
[ -n "$REV" ] && { command -v git >/dev/null 2>&1 || need+=(git); }
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  apt_install "${need[@]}"
fi

# --- a private apt configuration for Debian's source packages --------------------------
# Its deb-src lines use the archive URIs (and keyrings) the machine's own apt sources use:
# the main archive for bullseye, bookworm, trixie and sid, the security archive for their
# -security suites. Nothing is written to /etc/apt.
APTDIR=$CACHE/apt
machine_sources() {  # prints "URI<TAB>KEYRING<TAB>SUITES" for each deb/deb-src entry
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -e "$f" ] || continue
    awk 'BEGIN { RS = ""; FS = "\n" }
      { types = ""; uris = ""; suites = ""; key = ""; enabled = "yes"
        for (i = 1; i <= NF; i++) {
          l = $i; if (l ~ /^#/) continue
          n = index(l, ":"); if (n == 0) continue
          k = tolower(substr(l, 1, n - 1)); v = substr(l, n + 1); gsub(/^[ \t]+|[ \t]+$/, "", v)
          if (k == "types") types = v; else if (k == "uris") uris = v
          else if (k == "suites") suites = v; else if (k == "signed-by") key = v
          else if (k == "enabled") enabled = tolower(v)
        }
        if (types !~ /deb/ || enabled == "no" || key ~ /BEGIN/) next
        if (key == "") key = "-"
        m = split(uris, u, /[ \t]+/)
        for (j = 1; j <= m; j++) printf "%s\t%s\t%s\n", u[j], key, suites }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -e "$f" ] || continue
    sed -n 's/^[[:space:]]*deb\(-src\)\{0,1\}[[:space:]]\+//p' "$f" | while read -r line; do
      local key=- opts=
      if [ "${line#\[}" != "$line" ]; then opts=${line%%]*}; line=${line#*]}; fi
      case $opts in *signed-by=*) key=${opts#*signed-by=}; key=${key%% *} ;; esac
      set -- $line
      [ $# -ge 2 ] && printf '%s\t%s\t%s\n' "$1" "$key" "$2"
    done
  done
}
setup_private_apt() {
  mkdir -p "$APTDIR/lists/partial" "$APTDIR/archives/partial" "$APTDIR/sources.list.d" \
           "$APTDIR/preferences.d"
  local list=$APTDIR/sources.list.new uri key suites opt seen=" "
  : > "$list"
  while IFS=$'\t' read -r uri key suites; do
    case $seen in *" $uri "*) continue ;; esac
    seen="$seen$uri "
    opt=; [ "$key" != - ] && opt="[signed-by=$key] "
    case " $suites " in
      *-security*) for s in bullseye bookworm trixie; do
                     echo "deb-src ${opt}$uri $s-security main" >> "$list"; done ;;
      *) for s in bullseye bookworm trixie sid; do
           echo "deb-src ${opt}$uri $s main" >> "$list"; done ;;
    esac
  done < <(machine_sources)
  [ -s "$list" ] || die "no Debian archive found in /etc/apt/sources.list{,.d} to derive deb-src lines from"
  mv "$list" "$APTDIR/sources.list"
  cat > "$APTDIR/apt.conf" <<EOF
Dir::State "$APTDIR/";
Dir::State::Lists "$APTDIR/lists/";
Dir::State::status "/var/lib/dpkg/status";
Dir::Cache "$APTDIR/";
Dir::Cache::Archives "$APTDIR/archives/";
Dir::Etc::SourceList "$APTDIR/sources.list";
Dir::Etc::SourceParts "$APTDIR/sources.list.d/";
Dir::Etc::PreferencesParts "$APTDIR/preferences.d/";
APT::Sandbox::User "root";
EOF
}
papt() { APT_CONFIG=$APTDIR/apt.conf "$@"; }
# (no grep -q: with pipefail, apt-cache killed by SIGPIPE would make a match look like a miss)
debian_has() { papt apt-cache showsrc linux 2>/dev/null | grep -x "Version: $1" >/dev/null; }

# --- the compiler ------------------------------------------------------------------------
# --cc gcc-N: from the machine's apt if it has it, else from bullseye through the private
# apt configuration (bookworm has gcc-11 and gcc-12 only; bullseye's gcc-10 installs on it).
if [ -n "$CCOPT" ] && ! command -v "$CCOPT" >/dev/null 2>&1; then
  case $CCOPT in
    gcc-[0-9]*)
      log "installing $CCOPT"
      if ! apt_install "$CCOPT" 2>/dev/null; then
        setup_private_apt
        sed -n 's/^deb-src \(.*\) bullseye\(-security\)\{0,1\} main$/deb \1 bullseye\2 main/p' \
          "$APTDIR/sources.list" > "$APTDIR/sources.list.d/bullseye-bin.list"
        papt apt-get update -qq >&2 || true
        papt apt-get install -y -qq --no-install-recommends "$CCOPT" >&2 \
          || die "could not install $CCOPT (neither the machine's apt nor bullseye has it)"
        rm -f "$APTDIR/sources.list.d/bullseye-bin.list"
      fi ;;
    *) die "compiler $CCOPT not found" ;;
  esac
fi
CC=${CCOPT:-gcc}
CCMAJOR=$("$CC" -dumpversion | cut -d. -f1)

# --- the source tree ---------------------------------------------------------------------
SRC= KEY= LOCALVER= ORIGIN=
if [ -n "$DEBIAN" ]; then
  ORIGIN="debian:$DEBIAN"
  KEY=debian-$DEBIAN
  d=$CACHE/src/$KEY
  if [ ! -e "$d/.unpacked" ]; then
    setup_private_apt
    lists_age=$(( $(date +%s) - $(stat -c %Y "$APTDIR/lists" 2>/dev/null || echo 0) ))
    if [ "$lists_age" -gt 86400 ] || ! debian_has "$DEBIAN"; then
      log "apt-get update (private configuration $APTDIR/apt.conf)"
      papt apt-get update -qq >&2 || log "apt-get update reported errors (a suite may be missing); going on"
      touch "$APTDIR/lists"
    fi
    if ! debian_has "$DEBIAN"; then
      die "Debian's linux source $DEBIAN is not available; apt can serve: $(papt apt-cache showsrc linux \
        | sed -n 's/^Version: //p' | sort -uV | tr '\n' ' ')"
    fi
    rm -rf "$d"; mkdir -p "$d"
    log "fetching and unpacking linux $DEBIAN (apt-get source)"
    (cd "$d" && papt apt-get source -qq "linux=$DEBIAN" > "$d/apt-get-source.log" 2>&1) \
      || { tail -15 "$d/apt-get-source.log" >&2; die "apt-get source linux=$DEBIAN failed (see $d/apt-get-source.log)"; }
    touch "$d/.unpacked"
  fi
  SRC=$(find "$d" -mindepth 1 -maxdepth 1 -type d -name 'linux-*' | head -1)
  [ -n "$SRC" ] && [ -e "$SRC/Makefile" ] || die "no unpacked tree below $d"
  # Debian's revision goes into the release, so that two revisions of one upstream version
  # get two cache entries: 6.1.176-1 -> 6.1.176-deb1.
  rev=${DEBIAN##*-}; [ "$rev" = "$DEBIAN" ] && rev=0
  LOCALVER=-deb${rev//[^A-Za-z0-9.+]/.}
elif [ -n "$REV" ]; then
  gitdir=$(git -C "$TREE" rev-parse --absolute-git-dir 2>/dev/null) || die "$TREE is not a git repository"
  commit=$(git --git-dir="$gitdir" rev-parse --verify -q "$REV^{commit}") || die "no commit $REV in $TREE"
  ORIGIN="git:$TREE@$REV ($commit)"
  KEY=git-${commit:0:12}
  if [ -n "$SUBDIR" ]; then
    SUBDIR=${SUBDIR%/}
    [ "$(git --git-dir="$gitdir" cat-file -t "$commit:$SUBDIR" 2>/dev/null)" = tree ] \
      || die "no directory $SUBDIR in $REV ($commit)"
    ORIGIN="git:$TREE@$REV:$SUBDIR ($commit)"
    KEY=$KEY-$(printf '%s' "$SUBDIR" | sha256sum | cut -c1-8)
    commit=$commit:$SUBDIR
  fi
  d=$CACHE/src/$KEY
  if [ ! -e "$d/.unpacked" ]; then
    rm -rf "$d"; mkdir -p "$d"
    log "exporting $REV ($commit) with git archive"
    if ! git --git-dir="$gitdir" archive "$commit" 2>/dev/null | tar -x -C "$d" 2>/dev/null; then
      # A partial clone or mirror may lack some blobs: export everything else.
      missing=$(git --git-dir="$gitdir" ls-tree -r "$commit" | awk '$2 == "blob" { print $3, $4 }' \
        | git --git-dir="$gitdir" cat-file --batch-check='%(objectname) %(objecttype) %(rest)' \
        | awk '$2 == "missing" { print $1 }') || true
      [ -n "$missing" ] || die "git archive $commit failed"
      excludes=()
      while read -r path; do excludes+=(":(exclude,literal)$path"); done < <(
        git --git-dir="$gitdir" ls-tree -r "$commit" | grep -F -f <(echo "$missing") | cut -f2)
      log "the repository lacks ${#excludes[@]} blob(s); exporting without them: ${excludes[*]#:(exclude,literal)}"
      rm -rf "$d"; mkdir -p "$d"
      # (git still names the first missing blob on stderr, but exports the rest and succeeds)
      git --git-dir="$gitdir" archive "$commit" -- . "${excludes[@]}" 2>/dev/null | tar -x -C "$d" \
        || die "git archive $commit failed"
    fi
    # A repository that stored its files without modes (committed from a file system
    # without them) exports scripts/config and the build's other scripts unexecutable:
    # give back the exec bit to every file that starts with "#!".
    if [ -e "$d/scripts/config" ] && [ ! -x "$d/scripts/config" ]; then
      find "$d" -type f ! -perm -u+x -print0 \
        | perl -0ne 'chomp; open(my $f, "<", $_) or next; read($f, my $b, 2); print "$_\0" if $b eq "#!"' \
        > "$d/.scripts"
      xargs -0 -r chmod +x < "$d/.scripts"
      n=$(tr -cd '\0' < "$d/.scripts" | wc -c); rm -f "$d/.scripts"
      log "the repository stored no exec bits: restored them on $n scripts (files starting with #!)"
    fi
    touch "$d/.unpacked"
  fi
  SRC=$d
else
  [ -e "$TREE/Makefile" ] && [ -d "$TREE/arch/um" ] || die "$TREE is not a kernel source tree"
  SRC=$(cd "$TREE" && pwd)
  ORIGIN="tree:$SRC"
  KEY=tree-$(printf '%s' "$SRC" | sha256sum | cut -c1-12)
fi
BUILD=$CACHE/work/$KEY
mkdir -p "$BUILD"
LOG=$BUILD/build.log
: > "$LOG"

mkvar() { sed -n "s/^$1[[:space:]]*=[[:space:]]*\([0-9]*\).*/\1/p" "$SRC/Makefile" | head -1; }
KV=$(mkvar VERSION) KP=$(mkvar PATCHLEVEL)
[ -n "$KV" ] && [ -n "$KP" ] || die "cannot read VERSION/PATCHLEVEL from $SRC/Makefile"
KVER=$((KV * 1000 + KP))   # 4.16 -> 4016
log "source $ORIGIN: Linux $KV.$KP, building in $BUILD with $CC (gcc $CCMAJOR), -j$JOBS"

# --- fixes for old trees with today's tools (docs/kernel-build.md lists each) -----------
MK=(ARCH=um "CC=$CC" "HOSTCC=$CC")
KCFLAGS=() FIXES=()
if [ "$CCMAJOR" -ge 10 ] && [ "$KVER" -lt 5007 ]; then
  # gcc 10 defaults to -fno-common; before 5.7 the dtc lexer (and a few kernel files)
  # define globals in several objects ("multiple definition of yylloc").
  MK=(ARCH=um "CC=$CC" "HOSTCC=$CC -fcommon"); KCFLAGS+=(-fcommon)
  FIXES+=("-fcommon for kernel and host tools (gcc>=10, Linux<5.7)")
fi
if [ "$CCMAJOR" -ge 8 ] && [ "$KVER" -lt 5000 ]; then
  KCFLAGS+=(-Wno-error)
  FIXES+=("-Wno-error (new warnings in old trees)")
fi
# UML's host-side code includes glibc's headers, and old trees predate two glibc changes:
# 2.26 dropped `struct ucontext` (only `ucontext_t` is left), and 2.28 stopped declaring
# major()/minor()/makedev() in <sys/types.h> (<sys/sysmacros.h> has them); 4.4.1 and
# 3.13.10 needed both, 4.16.13 neither. These are source edits, made only in a copy this
# script exported (--rev, --debian); a tree of your own is never written to, and one
# that needs them stops with what to change.
src_fixes=()
ucontext_files=()
for f in arch/um/os-Linux/signal.c arch/x86/um/stub_segv.c; do
  grep -q 'struct ucontext \*uc = p;' "$SRC/$f" 2>/dev/null && ucontext_files+=("$f")
done
[ ${#ucontext_files[@]} -gt 0 ] && src_fixes+=("ucontext_t for struct ucontext in ${ucontext_files[*]} (glibc>=2.26)")
sysmacros=
if grep -q 'major(' "$SRC/arch/um/os-Linux/file.c" 2>/dev/null \
  && ! grep -q 'sys/sysmacros.h' "$SRC/arch/um/os-Linux/file.c"; then
  sysmacros=arch/um/os-Linux/file.c
  src_fixes+=("#include <sys/sysmacros.h> in $sysmacros (glibc>=2.28)")
fi
# Before 4.2 a tree includes include/linux/compiler-gccN.h for gcc N and knows 3 and 4
# only; gcc 4's is what later trees grew out of (later trees have one compiler-gcc.h).
gcc_header=
if [ -e "$SRC/include/linux/compiler-gcc4.h" ] && [ ! -e "$SRC/include/linux/compiler-gcc$CCMAJOR.h" ] \
  && grep -q 'gcc_header(__GNUC__)' "$SRC/include/linux/compiler-gcc.h"; then
  gcc_header=include/linux/compiler-gcc$CCMAJOR.h
  src_fixes+=("$gcc_header as a copy of compiler-gcc4.h (the tree knows gcc 3 and 4 only)")
fi
# ...and UML's host-side init.h defines __used for gcc 3 and 4 only (3.13.10's does).
um_init=
if grep -q '^#if __GNUC__ == 4$' "$SRC/arch/um/include/shared/init.h" 2>/dev/null; then
  um_init=arch/um/include/shared/init.h
  src_fixes+=("__used for gcc>4 in $um_init")
fi
# A tree committed with a build's output in it (4.15.1's repository carries a .config)
# stops an out-of-tree build: "is not clean, please run 'make mrproper'".
leftovers=()
for f in .config include/config include/generated/autoconf.h; do
  [ -e "$SRC/$f" ] && leftovers+=("$f")
done
[ ${#leftovers[@]} -gt 0 ] && src_fixes+=("removed a build's output the tree carries (${leftovers[*]})")
if [ ${#src_fixes[@]} -gt 0 ]; then
  if [ -z "$REV" ] && [ -z "$DEBIAN" ]; then
    die "$SRC needs these edits to build against this glibc (the script does not write to a tree of your own; give --tree REPO --rev REV to build an exported copy): ${src_fixes[*]}"
  fi
  for f in "${ucontext_files[@]}"; do sed -i 's/struct ucontext \*uc = p;/ucontext_t *uc = p;/' "$SRC/$f"; done
  [ -n "$sysmacros" ] \
    && sed -i '0,/^#include /s//#include <sys\/sysmacros.h>\n#include /' "$SRC/$sysmacros"
  [ -n "$gcc_header" ] && cp "$SRC/include/linux/compiler-gcc4.h" "$SRC/$gcc_header"
  [ -n "$um_init" ] && sed -i 's/^#if __GNUC__ == 4$/#if __GNUC__ >= 4/' "$SRC/$um_init"
  for f in "${leftovers[@]}"; do rm -rf "${SRC:?}/$f"; done
  # Kept beside the exported copy: a later run (after a failed build) finds the tree
  # already edited and must still list the edits in build-info.
  printf '%s\n' "${src_fixes[@]}" >> "$SRC/.bob-source-edits"
fi
if [ -e "$SRC/.bob-source-edits" ]; then
  while IFS= read -r line; do FIXES+=("$line"); done < "$SRC/.bob-source-edits"
fi
[ ${#KCFLAGS[@]} -gt 0 ] && MK+=("KCFLAGS=${KCFLAGS[*]}")
mk() { make -C "$SRC" O="$BUILD" "${MK[@]}" "$@"; }
[ ${#FIXES[@]} -gt 0 ] && log "fixes for this tree: ${FIXES[*]}"

# --- configuration -----------------------------------------------------------------------
log "configuring (defconfig + bob's options + olddefconfig)"
mk defconfig >> "$LOG" 2>&1 || { tail -20 "$LOG" >&2; die "make ARCH=um defconfig failed (see $LOG)"; }
find "$SRC" -name 'Kconfig*' -not -path "$SRC/debian/*" -not -path "$SRC/Documentation/*" -print0 \
  | xargs -0 sed -n 's/^[[:space:]]*\(menu\)\{0,1\}config[[:space:]]\{1,\}\([A-Za-z0-9_]\{1,\}\)[[:space:]]*$/\2/p' \
  | sort -u > "$BUILD/kconfig-symbols"
has() { grep -qx "$1" "$BUILD/kconfig-symbols"; }
REQUIRED=(EXT4_FS)
if has EXT4_USE_FOR_EXT2; then REQUIRED+=(EXT4_USE_FOR_EXT2); else REQUIRED+=(EXT2_FS EXT3_FS); fi
REQUIRED+=(XFS_FS BTRFS_FS F2FS_FS NILFS2_FS JFS_FS REISERFS_FS FUSE_FS BLK_DEV BLK_DEV_LOOP
           MD BLK_DEV_DM DM_SNAPSHOT DM_LOG_WRITES DM_FLAKEY DM_THIN_PROVISIONING HOSTFS TMPFS
           DEVTMPFS MAGIC_SYSRQ PROC_FS SYSFS)
present=() absent=()
for s in "${REQUIRED[@]}"; do if has "$s"; then present+=("$s"); else absent+=("$s"); fi; done
args=()
for s in "${present[@]}"; do args+=(--enable "$s"); done
has STATIC_LINK && args+=(--disable STATIC_LINK)
# A 64-bit guest always: 3.12.0's defconfig leaves UML 32-bit (CONFIG_64BIT off), whose
# host-side objects need a 32-bit libc this machine does not have.
has 64BIT && args+=(--enable 64BIT)
has DEVTMPFS_MOUNT && args+=(--enable DEVTMPFS_MOUNT)
[ -n "$LOCALVER" ] && args+=(--set-str LOCALVERSION "$LOCALVER")
args+=(--disable LOCALVERSION_AUTO)
"$SRC/scripts/config" --file "$BUILD/.config" "${args[@]}"
mk olddefconfig >> "$LOG" 2>&1 || { tail -20 "$LOG" >&2; die "make ARCH=um olddefconfig failed (see $LOG)"; }
# A second pass: options whose dependencies only the first pass enabled.
"$SRC/scripts/config" --file "$BUILD/.config" "${args[@]}"
mk olddefconfig >> "$LOG" 2>&1 || die "make ARCH=um olddefconfig failed (see $LOG)"
bad=()
for s in "${present[@]}"; do grep -qx "CONFIG_$s=y" "$BUILD/.config" || bad+=("$s"); done
[ ${#bad[@]} -eq 0 ] || die "Linux $KV.$KP: not built in after olddefconfig (a dependency is missing on ARCH=um): ${bad[*]}"
[ ${#absent[@]} -eq 0 ] || log "not in this tree's Kconfig (skipped): ${absent[*]}"

# kernelrelease needs include/config/auto.conf, which syncconfig (silentoldconfig before 4.17) writes.
if grep -q syncconfig "$SRC/scripts/kconfig/Makefile"; then sync=syncconfig; else sync=silentoldconfig; fi
mk "$sync" >> "$LOG" 2>&1 || { tail -20 "$LOG" >&2; die "make ARCH=um $sync failed (see $LOG)"; }
RELEASE=$(mk -s kernelrelease 2>>"$LOG" | tail -1)
[ -n "$RELEASE" ] || die "make kernelrelease printed nothing (see $LOG)"
HASH=$( { grep -v '^#' "$BUILD/.config" | grep -v '^$'; printf '%s\n' "${MK[@]}"; "$CC" --version | head -1; } \
        | sha256sum | cut -c1-16)
OUT=${OUT:-$CACHE/built-uml-$RELEASE}

if [ -x "$OUT/linux" ] && [ "$(cat "$OUT/release" 2>/dev/null)" = "$RELEASE" ] \
   && grep -qx "config-hash: $HASH" "$OUT/build-info" 2>/dev/null; then
  log "$RELEASE is already built with this configuration"
  echo "$OUT/linux"
  exit 0
fi

# --- build -------------------------------------------------------------------------------
log "building $RELEASE: make ARCH=um -j$JOBS linux (log: $LOG)"
T0=$(date +%s)
if ! mk -j"$JOBS" linux >> "$LOG" 2>&1; then
  grep -E 'error|Error|undefined reference|multiple definition' "$LOG" | tail -15 >&2 || true
  die "build of $RELEASE failed after $(( $(date +%s) - T0 ))s (full log: $LOG)"
fi
T1=$(date +%s)
mkdir -p "$OUT"
cp "$BUILD/linux" "$OUT/linux.new"
strip "$OUT/linux.new"
mv "$OUT/linux.new" "$OUT/linux"
cp "$BUILD/.config" "$OUT/config"
echo "$RELEASE" > "$OUT/release"
cp "$LOG" "$OUT/build.log"
cat > "$OUT/build-info" <<EOF
source: $ORIGIN
release: $RELEASE
config-hash: $HASH
compiler: $("$CC" --version | head -1)
make: ${MK[*]}
fixes: ${FIXES[*]:-none}
build-seconds: $((T1 - T0))
total-seconds: $((T1 - START))
jobs: $JOBS
built: $(date -u +%Y-%m-%dT%H:%M:%SZ)
EOF
v=$("$OUT/linux" --version 2>&1 | head -1 || true)
case $v in *"$RELEASE"*) ;; *) die "$OUT/linux --version printed '$v', not $RELEASE" ;; esac
log "built $RELEASE in $((T1 - T0))s (all steps $((T1 - START))s)"
echo "$OUT/linux"
