#!/usr/bin/env bash
# Builds the runtime container image rl-service:latest from
# deploy/docker/Dockerfile without any registry, then smoke-tests it.
#
#   tools/image.sh                  build (cached parts are reused) and test
#   tools/image.sh --rebuild-base   debootstrap the Debian base again
#   tools/image.sh --save FILE      also write it to FILE as a docker-archive
#                                   named rl-service:latest, as deploy/k8s
#                                   names it (docker load, podman load,
#                                   ctr images import, kind load image-archive)
#   tools/image.sh --no-smoke       build only
#
# Steps (each bounded by a timeout; logs under runs/image/):
#  1. set-up (tools/setup.sh) and the image tools, pinned (IMAGE_APT_PACKAGES:
#     podman, buildah, debootstrap, patchelf), installed here rather than in
#     setup.sh so that the README's test command does not need them.
#  2. the four binaries: .bazelrc's --config=opt (-O3, the stated baseline
#     -march=x86-64-v2, as the Slurm job and tools/train.sh build them; never
#     --config=native, which would tie the image to this CPU), in the main
#     output directory, so whatever the tests already built is reused (the
#     flags are the default build's), and without touching the bazel-*
#     symlinks (--symlink_prefix=/).
#  3. the build context: the binaries with RUNPATH $ORIGIN/../lib (patchelf;
#     no LD_LIBRARY_PATH), exactly the non-Debian libraries `ldd` resolves for
#     them (LibTorch and the CUDA runtime libraries from .venv), examples/,
#     and roms/ (the Atari ROMs of the pinned ale-py wheel).
#     Checks that every Debian library they need has its package pinned in the
#     Dockerfile at the version installed here (what they were built against)
#     or comes with the base or those packages' dependencies.
#  4. the base image localhost/rl-debian-base:bookworm: Debian 12 minbase,
#     debootstrap'd from the mirror apt uses here (read from apt's
#     configuration), imported with `podman import`; kept for later runs.
#  5. podman build --isolation=chroot (layers cached; the LibTorch layer is
#     reused across code changes); tags localhost/rl-service:latest and
#     removes the image that tag named before.
#  6. smoke test in a `buildah from` container, `buildah run --isolation=chroot`
#     (`podman run` cannot run in the sandbox this was written in: crun's
#     setrlimit is refused): runs as uid 10001, no library missing, each
#     binary starts; coordinator and telemetry listen and exit 0 on SIGTERM;
#     a learner and an actor train a 2048-step CartPole run; the image's
#     default command (the embedded system) runs a run submitted with
#     .venv/bin/rlctl from outside the container to SUCCEEDED.
#
# Needs root (debootstrap; podman's root storage, overlay driver). The image
# is kept; the smoke container and temporary files are removed on exit.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

IMAGE="localhost/rl-service:latest"
BASE_IMAGE="localhost/rl-debian-base:bookworm"
SUITE="bookworm"
SMOKE_CTR="rl-image-smoke"
LOG_DIR="$ROOT/runs/image"
# The shipped binaries' CPU baseline is --config=opt's: x86-64-v2 (SSE4.2,
# POPCNT; every x86-64 server CPU since about 2009), with the hot loops' AVX2
# clones picked at load time; LibTorch picks its own kernels at run time.
BAZEL_FLAGS=(--config=opt)
TARGETS=(//coordinator:coordinator_main //learner:learner_main //actor:actor_main
  //telemetry:telemetry_main)
# Plugins built with the service, staged in plugins/ where actors look for
# them by name (envs/env_plugin.h: <binary's dir>/../plugins), the
# directory operators list in --env_plugin_dirs: `plugin: mujoco`, and the
# device env `plugin: pixel_breakout` (its host build: the image is the CPU's),
# the two-player `plugin: light_cycles`, MPE's `plugin: mpe_spread`, and
# `plugin: atari` (ALE in C++; its ROMs, the pinned ale-py wheel's, in
# roms/, named by RL_ATARI_ROM_DIR).
PLUGINS=(//envs/mujoco:libmujoco_envs.so //examples/device_env:libpixel_breakout.so
  //envs/games:liblight_cycles.so //envs/games:libmpe_spread.so
  //envs/atari:libatari_envs.so)

log() { printf '[image %4ds] %s\n' "$SECONDS" "$*" >&2; }
die() { printf '[image %4ds] FAILED: %s\n' "$SECONDS" "$*" >&2; exit 1; }

rebuild_base=0
smoke=1
save=""
while (($#)); do
  case "$1" in
    --rebuild-base) rebuild_base=1 ;;
    --no-smoke) smoke=0 ;;
    --save) save="$(realpath -m "${2:?--save needs a file}")"; shift ;;
    --save=*) save="$(realpath -m "${1#--save=}")" ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if [[ "$(id -u)" != 0 ]]; then
  command -v sudo >/dev/null || die "needs root (debootstrap, podman storage)"
  exec sudo --preserve-env=PATH bash "$0" "$@"
fi

mkdir -p "$LOG_DIR"
exec 9>"$LOG_DIR/.lock"
flock -n 9 || die "another tools/image.sh is running (lock $LOG_DIR/.lock)"

WORK="$(mktemp -d "${TMPDIR:-/var/tmp}/rl-image.XXXXXX")"
BG_PIDS=()
cleanup() {
  local rc=$?
  set +e
  for pid in "${BG_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  buildah rm "$SMOKE_CTR" >/dev/null 2>&1 || true
  # debootstrap mounts proc/sys under its target: never rm across a mount.
  findmnt -rn -o TARGET | grep -F "$WORK/" | sort -r |
    while read -r m; do umount -l "$m"; done
  rm -rf --one-file-system "$WORK"
  if ((rc != 0)); then log "logs: $LOG_DIR"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Runs "$@" with a time limit, output to LOG_DIR/<name>.log; on failure shows
# the log's tail.
step() {
  local name="$1" limit="$2"
  shift 2
  local rc=0
  timeout --kill-after=10 "$limit" "$@" >"$LOG_DIR/$name.log" 2>&1 || rc=$?
  if ((rc != 0)); then
    tail -n 30 "$LOG_DIR/$name.log" >&2
    ((rc == 124)) && die "$name: took longer than ${limit}s"
    die "$name: exit code $rc (log: $LOG_DIR/$name.log)"
  fi
}

# --- 1. set-up and the image tools ------------------------------------------
log "set-up (tools/setup.sh)"
step setup 3600 bash tools/setup.sh

# Exact versions of Debian 12 "bookworm"; installed without recommends. podman
# runs rootful with its default overlay storage (kernel overlayfs: no
# fuse-overlayfs) and builds with --isolation=chroot (no runc needed).
IMAGE_APT_PACKAGES=(
  "podman=4.3.1+ds1-8+deb12u1+b3"
  "buildah=1.28.2+ds1-3+deb12u1+b3"
  "crun=1.8.1-1+deb12u1"
  "conmon=2.1.6+ds1-1"
  "golang-github-containers-common=0.50.1+ds1-4"
  "golang-github-containers-image=5.23.1-4"
  "containernetworking-plugins=1.1.1+ds1-3+b5"
  "uidmap=1:4.13+dfsg1-1+deb12u2"
  "debootstrap=1.0.128+nmu2+deb12u2"
  "patchelf=0.14.3-1+b1"
)
missing=()
for spec in "${IMAGE_APT_PACKAGES[@]}"; do
  pkg="${spec%%=*}"
  want="${spec#*=}"
  have="$(dpkg-query -W -f='${Status} ${Version}' "$pkg" 2>/dev/null || true)"
  if [[ "$have" != "install ok installed $want" ]]; then missing+=("$spec"); fi
done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  step apt-update 300 apt-get update -q
  step apt-install 900 env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends --allow-downgrades "${missing[@]}"
else
  log "image tools (podman, buildah, debootstrap, patchelf): up to date"
fi

# --- 2. the binaries ----------------------------------------------------------
log "bazel build ${BAZEL_FLAGS[*]} (from nothing: ~7 min on 2 cores; after the tests, links only)"
step bazel-build 5400 bazel build "${BAZEL_FLAGS[@]}" --symlink_prefix=/ \
  --show_result=10 "${TARGETS[@]}" "${PLUGINS[@]}"
# Where they are, from the build's result lines (no second Bazel command,
# which would queue behind others on a shared server).
declare -A built=()
for target in "${TARGETS[@]}" "${PLUGINS[@]}"; do
  built["$target"]="$(grep -A1 -E "^Target $target up.to.date:" "$LOG_DIR/bazel-build.log" |
    sed -n '2s/^ *//p' || true)"
  [[ -x "${built[$target]}" ]] || die "bazel build: no binary for $target in its output"
done

# --- 3. the build context -----------------------------------------------------
CTX="$WORK/context"
mkdir -p "$CTX/bin" "$CTX/lib" "$CTX/plugins" "$CTX/examples" "$CTX/roms"
VENV_REAL="$(realpath "$ROOT/.venv")"
declare -A system_pkgs=()
# The Debian package that owns a library path (usrmerge: /lib or /usr/lib).
owner_of() {
  local p="$1" real alt
  real="$(realpath "$p")"
  for cand in "$p" "$real" "${p/#\/usr\/lib\//\/lib\/}" "${real/#\/usr\/lib\//\/lib\/}" \
      "${p/#\/lib\//\/usr\/lib\/}" "${real/#\/lib\//\/usr\/lib\/}"; do
    alt="$(dpkg-query -S "$cand" 2>/dev/null | head -n1 | cut -d: -f1)" || true
    if [[ -n "$alt" ]]; then echo "$alt"; return; fi
  done
  return 1
}
# stage FILE DEST RPATH: FILE into DEST (bin/, plugins/) with RPATH, and the
# non-Debian libraries ldd resolves for it into lib/; the Debian ones'
# packages noted.
stage() {
  local file="$1" dest="$2" rpath="$3" name soname arrow path real
  name="$(basename "$file")"
  while read -r soname arrow path _; do
    [[ "$arrow" == "=>" ]] || continue
    [[ "$path" == "not" ]] && die "$name: $soname not found (ldd)"
    real="$(realpath "$path")"
    if [[ "$real" == "$VENV_REAL"/* || "$real" == "$ROOT"/* ]]; then
      # A hard link where it can be (never written to), else a copy.
      [[ -e "$CTX/lib/$soname" ]] ||
        ln "$real" "$CTX/lib/$soname" 2>/dev/null || cp "$real" "$CTX/lib/$soname"
    else
      pkg="$(owner_of "$path")" || die "$name: no Debian package owns $path"
      system_pkgs["${pkg%%:*}"]=1
    fi
  done < <(ldd "$file")
  install -m 0755 "$file" "$dest/$name"
  patchelf --set-rpath "$rpath" "$dest/$name"
  # The staged file must resolve its non-Debian libraries from lib/ alone.
  if ldd "$dest/$name" | grep -E 'not found|'"$ROOT"'/' >&2; then
    die "$name: after patchelf, a library resolves outside lib/"
  fi
}
for target in "${TARGETS[@]}"; do
  stage "${built[$target]}" "$CTX/bin" '$ORIGIN/../lib'
done
for target in "${PLUGINS[@]}"; do
  stage "${built[$target]}" "$CTX/plugins" '$ORIGIN/../lib'
done
cp examples/*.yaml examples/*.json "$CTX/examples/"
# The run files of the image's own plugins (not the bridge's: the image
# has no Python).
mkdir -p "$CTX/examples/atari" "$CTX/examples/mujoco"
cp examples/mujoco/*.yaml "$CTX/examples/mujoco/"
for f in examples/atari/*.yaml; do
  [[ "$f" == *_bridge.yaml ]] || cp "$f" "$CTX/examples/atari/"
done
# The Atari ROMs of the pinned ale-py wheel (tools/requirements.txt), all of
# them (under 1 MB): the plugin reads them from RL_ATARI_ROM_DIR.
ale_dir="$("$ROOT/.venv/bin/python" -c 'import ale_py, os; print(os.path.dirname(ale_py.__file__))')" ||
  die "ale_py is not importable from .venv (tools/setup.sh installs it)"
roms="$ale_dir/roms"
[[ -s "$roms/pong.bin" ]] || die "no Atari ROMs at $roms (tools/setup.sh installs ale-py)"
cp "$roms"/*.bin "$CTX/roms/"
log "context: $(ls "$CTX/bin" "$CTX/plugins" | tr '\n' ' ')+ $(ls "$CTX/roms" | wc -l) ROMs" \
  "+ $(ls "$CTX/lib" | wc -l) libraries" \
  "($(du -sm "$CTX/lib" | cut -f1) MB: $(ls "$CTX/lib" | tr '\n' ' '))"

# The Dockerfile's pins must be what the binaries were built against.
DOCKERFILE="$ROOT/deploy/docker/Dockerfile"
declare -A pinned=()
while read -r spec; do
  pkg="${spec%%=*}"
  want="${spec#*=}"
  have="$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null || true)"
  [[ "$have" == "$want" ]] ||
    die "Dockerfile pins $pkg=$want, but the binaries were built against ${have:-no $pkg}"
  pinned["$pkg"]="$want"
done < <(grep -oE '^\s+lib[a-z0-9.+-]+=[^ \\]+' "$DOCKERFILE" | tr -d ' \t')
((${#pinned[@]} > 0)) || die "no pinned packages found in $DOCKERFILE"
log "Debian libraries needed (from ldd): ${!system_pkgs[*]}"
log "pinned in the Dockerfile at the versions built against: ${!pinned[*]}"

# --- 4. the Debian base -------------------------------------------------------
if ((rebuild_base)) || ! podman image exists "$BASE_IMAGE"; then
  # The mirror apt uses here for the suite (sources.list or deb822 sources).
  mirror="$(apt-get indextargets --format '$(SITE) $(RELEASE) $(TARGET_OF)' |
    awk -v s="$SUITE" '$2 == s && $3 == "deb" { print $1; exit }')"
  [[ -n "$mirror" ]] || die "no apt source for Debian $SUITE in /etc/apt"
  log "debootstrap --variant=minbase $SUITE from $mirror (~1-2 min)"
  rootfs="$WORK/rootfs"
  step debootstrap 1200 debootstrap --variant=minbase --arch=amd64 \
    --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
    "$SUITE" "$rootfs" "$mirror"
  # apt inside the image uses the same sources as here: the suite, its
  # updates and security, from apt's configuration (no host name is written
  # in this repository).
  apt-get indextargets --format '$(SITE) $(RELEASE) $(COMPONENT) $(TARGET_OF)' |
    awk -v s="$SUITE" '$4 == "deb" && ($2 == s || $2 == s "-updates" || $2 == s "-security") {
      print "deb " $1 " " $2 " " $3 }' | sort -u >"$rootfs/etc/apt/sources.list"
  # Slim like Debian's official images: no docs (copyright files stay), man
  # pages or translations, in the base and in what is installed on it.
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/01-rl-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  find "$rootfs/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete
  find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$rootfs"/usr/share/{man,info}/* "$rootfs"/var/cache/apt/archives/*.deb \
    "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log \
    "$rootfs"/var/log/apt/* "$rootfs"/debootstrap
  find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias \
    -exec rm -rf {} +
  # Written by the container runtime: not this machine's.
  rm -f "$rootfs/etc/resolv.conf" "$rootfs/etc/hostname"
  log "podman import -> $BASE_IMAGE"
  podman rmi "$BASE_IMAGE" >/dev/null 2>&1 || true
  tar --numeric-owner -C "$rootfs" -cf - . |
    timeout 600 podman import --change 'CMD ["/bin/bash"]' \
      --message "Debian $SUITE minbase, debootstrap from $mirror" - "$BASE_IMAGE" \
      >"$LOG_DIR/import.log" 2>&1 || die "podman import (log: $LOG_DIR/import.log)"
  rm -rf --one-file-system "$rootfs"
else
  log "base $BASE_IMAGE: present (created $(podman image inspect \
    --format '{{.Created}}' "$BASE_IMAGE" | cut -d. -f1); --rebuild-base to redo)"
fi

# --- 5. the image -------------------------------------------------------------
old_id="$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
log "podman build --isolation=chroot -> $IMAGE"
step podman-build 1800 podman build --isolation=chroot --layers \
  --build-arg "BASE=$BASE_IMAGE" -f "$DOCKERFILE" -t "$IMAGE" "$CTX"
grep -E '^STEP|Using cache' "$LOG_DIR/podman-build.log" |
  sed -E 's/^(.{100}).*/\1.../; s/^/    /' >&2 || true
new_id="$(podman image inspect --format '{{.Id}}' "$IMAGE")"
if [[ -n "$old_id" && "$old_id" != "$new_id" ]]; then
  podman rmi "$old_id" >/dev/null 2>&1 || true
fi
size_mb=$(($(podman image inspect --format '{{.Size}}' "$IMAGE") / 1000000))
log "image $IMAGE ${new_id:0:12}: $size_mb MB"

if [[ -n "$save" ]]; then
  # Named as the manifests name it (image: rl-service, i.e.
  # docker.io/library/rl-service:latest once a runtime normalises it), not
  # podman's localhost/ name.
  log "saving to $save as rl-service:latest"
  rm -f "$save"
  podman tag "$IMAGE" docker.io/library/rl-service:latest
  rc=0
  timeout 600 podman save --format docker-archive -o "$save" \
    docker.io/library/rl-service:latest >"$LOG_DIR/podman-save.log" 2>&1 || rc=$?
  podman untag "$IMAGE" docker.io/library/rl-service:latest
  ((rc == 0)) || die "podman save: exit code $rc (log: $LOG_DIR/podman-save.log)"
  log "saved $save ($(du -m "$save" | cut -f1) MB)"
fi
if ((!smoke)); then log "done (no smoke test)"; exit 0; fi

# --- 6. smoke test ------------------------------------------------------------
log "smoke test: buildah from $IMAGE; buildah run --isolation=chroot"
ok() { log "  ok: $*"; }
expect() {  # expect NAME PATTERN FILE: grep -E PATTERN in FILE, else fail
  grep -qE "$2" "$3" || { tail -n 40 "$3" | sed 's/^/    | /' >&2; die "smoke $1: no line matching /$2/"; }
}
# Image configuration.
cfg="$(podman image inspect --format \
  '{{.Config.User}}|{{.Config.WorkingDir}}|{{json .Config.Entrypoint}}|{{json .Config.Cmd}}' "$IMAGE")"
IFS='|' read -r cfg_user cfg_workdir cfg_entry cfg_cmd <<<"$cfg"
[[ "$cfg_user" == "10001:10001" && "$cfg_workdir" == "/var/lib/rl" ]] ||
  die "image config: user '$cfg_user', workdir '$cfg_workdir'"
[[ "$cfg_entry" == "null" || "$cfg_entry" == "[]" ]] || die "image has an ENTRYPOINT: $cfg_entry"
ok "config: user $cfg_user, workdir $cfg_workdir, no entrypoint, cmd $cfg_cmd"

buildah rm "$SMOKE_CTR" >/dev/null 2>&1 || true
buildah from --pull-never --name "$SMOKE_CTR" "$IMAGE" >/dev/null
sed -e 's/^name: .*/name: smoke/' -e 's/^total_env_steps: .*/total_env_steps: 2048/' \
  -e 's/^checkpoint_interval: .*/checkpoint_interval: 4/' examples/cartpole.yaml \
  >"$WORK/smoke.yaml"
# The MuJoCo plugin of /opt/rl/plugins, stepped by a real actor: Hopper-v5.
sed -e 's/^name: .*/name: smoke-mujoco/' -e 's/^total_env_steps: .*/total_env_steps: 4096/' \
  -e '/^target_return/d' examples/mujoco/hopper.yaml >"$WORK/smoke_mujoco.yaml"
# The Atari plugin with the image's ROMs: Pong-v5, the Nature CNN on
# [4, 84, 84] frames, 2 segments.
sed -e 's/^name: .*/name: smoke-atari/' -e 's/^total_env_steps: .*/total_env_steps: 2048/' \
  examples/atari/pong.yaml >"$WORK/smoke_atari.yaml"
chmod 0644 "$WORK/smoke.yaml" "$WORK/smoke_mujoco.yaml" "$WORK/smoke_atari.yaml"
for f in smoke smoke_mujoco smoke_atari; do
  buildah copy --chown 10001:10001 "$SMOKE_CTR" "$WORK/$f.yaml" "/tmp/$f.yaml" >/dev/null
done
# in_ctr NAME LIMIT SCRIPT: runs the bash SCRIPT in the smoke container, as
# the image's user, output to LOG_DIR/smoke-NAME.log.
in_ctr() {
  local name="$1" limit="$2" script="$3" rc=0
  timeout --kill-after=10 "$limit" buildah run --isolation=chroot "$SMOKE_CTR" \
    -- bash -c "$script" >"$LOG_DIR/smoke-$name.log" 2>&1 || rc=$?
  echo "exit=$rc" >>"$LOG_DIR/smoke-$name.log"
  ((rc != 124)) || die "smoke $name: took longer than ${limit}s (log: $LOG_DIR/smoke-$name.log)"
}

in_ctr user 60 'id; echo "cwd=$PWD"; touch /var/lib/rl/.w && echo writable'
expect user '^uid=10001\(rl\) gid=10001\(rl\) groups=10001\(rl\)$' "$LOG_DIR/smoke-user.log"
expect user '^cwd=/var/lib/rl$' "$LOG_DIR/smoke-user.log"
expect user '^writable$' "$LOG_DIR/smoke-user.log"
ok "runs as $(head -n1 "$LOG_DIR/smoke-user.log"), in /var/lib/rl (writable)"

in_ctr ldd 60 'for b in /opt/rl/bin/* /opt/rl/plugins/*; do echo "== $b"; ldd "$b"; done'
if grep -q 'not found' "$LOG_DIR/smoke-ldd.log"; then
  grep -B50 'not found' "$LOG_DIR/smoke-ldd.log" >&2; die "smoke ldd: a library is missing"
fi
for lib in libtorch_cpu.so libc10.so libcudart.so.12; do
  expect ldd "^\s+${lib//./\\.} => /opt/rl/(bin/\\.\\./)?lib/${lib//./\\.} " "$LOG_DIR/smoke-ldd.log"
done
ok "ldd: every library found; LibTorch from /opt/rl/lib"

# Every Debian package behind an ldd'd library is installed, pinned ones at
# their pin, the others at least at the version here.
in_ctr packages 60 "dpkg-query -W -f='\${Package} \${Version}\n' ${!system_pkgs[*]}"
for pkg in "${!system_pkgs[@]}"; do
  got="$(awk -v p="$pkg" '$1 == p { print $2 }' "$LOG_DIR/smoke-packages.log")"
  [[ -n "$got" ]] || die "smoke packages: $pkg is not installed in the image"
  if [[ -n "${pinned[$pkg]:-}" ]]; then
    [[ "$got" == "${pinned[$pkg]}" ]] || die "smoke packages: $pkg $got, pinned ${pinned[$pkg]}"
  else
    dpkg --compare-versions "$got" ge "$(dpkg-query -W -f='${Version}' "$pkg")" ||
      die "smoke packages: $pkg $got is older than here"
  fi
done
ok "Debian packages: ${#system_pkgs[@]} needed, all installed (${#pinned[@]} pinned)"

# Each binary runs (the loader finds every library, static initialisers run)
# and refuses an unknown flag, naming it, with an exit code from main (not
# 126/127 from the loader, nor a signal).
in_ctr flags 60 'for b in coordinator_main learner_main actor_main telemetry_main; do
  "$b" --bogus_flag 2>&1 | head -n 3; echo "$b exit=${PIPESTATUS[0]}"; done'
for b in coordinator_main learner_main actor_main telemetry_main; do
  expect flags "^$b exit=[12]\$" "$LOG_DIR/smoke-flags.log"
done
(($(grep -c 'bogus_flag' "$LOG_DIR/smoke-flags.log") >= 4)) ||
  die "smoke flags: not every binary named the unknown flag"
ok "each binary starts and refuses an unknown flag:" \
  "$(grep -o '^[a-z_]* exit=[0-9]*' "$LOG_DIR/smoke-flags.log" | paste -sd, -)"

# serve NAME PATTERN COMMAND, then the script on stdin: starts the server
# COMMAND in the container, waits for its line matching PATTERN, prints its
# uid, runs the script, stops it with SIGTERM and prints its exit code.
serve() {
  local name="$1" pattern="$2" command="$3" after
  after="$(cat)"
  in_ctr "$name" 60 "$command >/tmp/$name.out 2>&1 &
pid=\$!
for i in \$(seq 200); do grep -qE '$pattern' /tmp/$name.out && break; sleep 0.1; done
echo \"uid=\$(awk '/^Uid:/ { print \$2 }' /proc/\$pid/status)\"
$after
kill -TERM \$pid; wait \$pid; echo \"server exit=\$?\"
cat /tmp/$name.out"
}
serve coordinator 'coordinator listening on' 'coordinator_main --port=0 --store=/tmp/c.db \
  --runs_dir=/tmp/runs --local_workers= --local_telemetry=false --metrics_port=-1' </dev/null
expect coordinator '^coordinator listening on 127\.0\.0\.1:[0-9]+' "$LOG_DIR/smoke-coordinator.log"
expect coordinator '^uid=10001$' "$LOG_DIR/smoke-coordinator.log"
expect coordinator '^server exit=0$' "$LOG_DIR/smoke-coordinator.log"
ok "coordinator_main: $(grep -m1 'coordinator listening' "$LOG_DIR/smoke-coordinator.log"), uid 10001, exit 0 on SIGTERM"

serve telemetry 'telemetry listening on' 'telemetry_main --port=0 --http_port=0 \
  --http_port_file=/tmp/t.http --store=/tmp/t.db --tensorboard_dir=/tmp/tb' <<'EOF'
exec 3<>"/dev/tcp/127.0.0.1/$(cat /tmp/t.http)"
printf 'GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
timeout 5 cat <&3 | head -n1
exec 3>&-
EOF
expect telemetry '^telemetry listening on 127\.0\.0\.1:[0-9]+' "$LOG_DIR/smoke-telemetry.log"
expect telemetry '^uid=10001$' "$LOG_DIR/smoke-telemetry.log"
expect telemetry '^HTTP/1\.[01] 200 OK' "$LOG_DIR/smoke-telemetry.log"
expect telemetry '^server exit=0$' "$LOG_DIR/smoke-telemetry.log"
ok "telemetry_main: listening, GET /metrics 200, uid 10001, exit 0 on SIGTERM"

# train_in_ctr NAME RUN_FILE: learner and actor as separate processes, the
# run to its end; both must exit 0 with a result.
train_in_ctr() {
  local name="$1" run="$2"
  in_ctr "$name" 300 "set -u
learner_main --run=$run --port=0 --port_file=/tmp/$name.port \\
  --run_dir=/tmp/$name-run --result_file=/tmp/$name.json --metrics_port=-1 >/tmp/$name-l.log 2>&1 &
lpid=\$!
for i in \$(seq 300); do [[ -s /tmp/$name.port ]] && break; sleep 0.1; done
actor_main --learner=127.0.0.1:\$(cat /tmp/$name.port) --run=$run --actor_id=0 \\
  --metrics_port=-1 >/tmp/$name-a.log 2>&1 &
apid=\$!
wait \$lpid; echo \"learner exit=\$?\"
wait \$apid; echo \"actor exit=\$?\"
echo \"result: \$(tr -d '\\n' </tmp/$name.json)\"
grep -h 'environment plugin' /tmp/$name-a.log || true
tail -n 5 /tmp/$name-l.log /tmp/$name-a.log"
  expect "$name" '^learner exit=0$' "$LOG_DIR/smoke-$name.log"
  expect "$name" '^actor exit=0$' "$LOG_DIR/smoke-$name.log"
  expect "$name" '^result: \{.+\}' "$LOG_DIR/smoke-$name.log"
}
train_in_ctr training /tmp/smoke.yaml
ok "learner_main + actor_main: 2048-step CartPole run, both exit 0;" \
  "$(grep -m1 '^result:' "$LOG_DIR/smoke-training.log" | cut -c1-160)"
train_in_ctr training-mujoco /tmp/smoke_mujoco.yaml
grep -q 'plugin /opt/rl/.*plugins/libmujoco_envs.so' "$LOG_DIR/smoke-training-mujoco.log" ||
  die "smoke training-mujoco: the actor did not name /opt/rl/plugins/libmujoco_envs.so"
ok "learner_main + actor_main: 4096-step Hopper-v5 run (plugin: mujoco from /opt/rl/plugins), both exit 0;" \
  "$(grep -m1 '^result:' "$LOG_DIR/smoke-training-mujoco.log" | cut -c1-120)"
train_in_ctr training-atari /tmp/smoke_atari.yaml
grep -q 'plugin /opt/rl/.*plugins/libatari_envs.so' "$LOG_DIR/smoke-training-atari.log" ||
  die "smoke training-atari: the actor did not name /opt/rl/plugins/libatari_envs.so"
ok "learner_main + actor_main: 2048-step Pong-v5 run (plugin: atari, ROMs from /opt/rl/roms), both exit 0;" \
  "$(grep -m1 '^result:' "$LOG_DIR/smoke-training-atari.log" | cut -c1-120)"

# The image's default command (the embedded system), on free ports; a run
# submitted from outside with rlctl (chroot isolation shares the network).
IFS=$'\n' read -r -d '' -a cmd < <(python3 -c 'import json,sys; print("\n".join(json.loads(sys.argv[1])))' "$cfg_cmd" && printf '\0')
emb_log="$LOG_DIR/smoke-embedded.log"
# Made before the container starts: the loop below reads it at once (a
# missing file failed the read, and with it, under set -e, the script).
: >"$emb_log"
timeout --kill-after=10 300 buildah run --isolation=chroot "$SMOKE_CTR" -- bash -c \
  '"$@" --port=0 & pid=$!; echo "SMOKE pid=$pid"; wait $pid; echo "SMOKE exit=$?"' \
  smoke "${cmd[@]}" >"$emb_log" 2>&1 &
BG_PIDS+=($!)
emb_bg=$!
port=""
for _ in $(seq 300); do
  port="$(sed -nE 's/^coordinator listening on [0-9.]+:([0-9]+).*/\1/p' "$emb_log" | head -n1 || true)"
  [[ -n "$port" ]] && break
  kill -0 "$emb_bg" 2>/dev/null || break
  sleep 0.1
done
[[ -n "$port" ]] || { sed 's/^/    | /' "$emb_log" >&2; die "smoke embedded: no listening line"; }
cpid="$(sed -nE 's/^SMOKE pid=([0-9]+)$/\1/p' "$emb_log")"
grep -q coordinator_main "/proc/$cpid/cmdline" 2>/dev/null ||
  die "smoke embedded: pid $cpid is not the coordinator"
BG_PIDS=("$cpid" "${BG_PIDS[@]}")  # stopped first on exit (it stops its workers)
rc=0
timeout 300 "$ROOT/.venv/bin/rlctl" --insecure --coordinator "127.0.0.1:$port" submit \
  --watch "$WORK/smoke.yaml" >"$LOG_DIR/smoke-rlctl.log" 2>&1 || rc=$?
((rc == 0)) || { sed 's/^/    | /' "$LOG_DIR/smoke-rlctl.log" "$emb_log" >&2; die "smoke embedded: rlctl submit --watch exit $rc"; }
expect rlctl '^run-[0-9]+ SUCCEEDED after ' "$LOG_DIR/smoke-rlctl.log"
children="$(ps --ppid "$cpid" -o uid=,comm= | sort | uniq -c | awk '{$1=$1; print}' | paste -sd, -)"
ps --ppid "$cpid" -o uid= | grep -qv '^ *10001$' && die "smoke embedded: a worker not as uid 10001: $children"
for w in learner_main actor_main telemetry_main; do
  [[ "$children" == *"$w"* ]] || die "smoke embedded: no $w child ($children)"
done
cuid="$(awk '/^Uid:/ { print $2 }' "/proc/$cpid/status")"
[[ "$cuid" == 10001 ]] || die "smoke embedded: coordinator uid $cuid"
kill -TERM "$cpid"
wait "$emb_bg" || die "smoke embedded: buildah run exit $?"
BG_PIDS=()
expect embedded '^SMOKE exit=0$' "$emb_log"
ok "default command (embedded system) on :$port: $(grep -m1 'SUCCEEDED after' "$LOG_DIR/smoke-rlctl.log");" \
  "workers (count uid comm): $children; exit 0 on SIGTERM"

log "done: $IMAGE ${new_id:0:12}, $size_mb MB, smoke test passed"
