#!/usr/bin/env bash
# One idempotent set-up step for building, testing and running the service.
#
#   tools/setup.sh          install what is missing; seconds when nothing is.
#   tools/setup.sh --gpu    also the GPU runtime of LibTorch (cuDNN, cuBLAS,
#                           NCCL, ...: tools/requirements-gpu.txt, ~2.6 GB).
#                           Installed without the flag too where an NVIDIA
#                           driver is present; never on other machines.
#
# Installs (pinned): Debian packages for the toolchain and C++ libraries, and a
# project virtual environment (.venv) holding LibTorch (PyPI torch, C++ side
# only), the Python client (.venv/bin/rlctl) and its dependencies, and
# Debian's kubectl 1.20 (.venv/bin/kubectl). Writes .bazelrc.local, which
# points Bazel's Python rules at the venv. Both README commands run this first.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '[setup] %s\n' "$*" >&2; }

WANT_GPU=0
for arg in "$@"; do
  case "$arg" in
    --gpu) WANT_GPU=1 ;;
    *) echo "usage: tools/setup.sh [--gpu]" >&2; exit 2 ;;
  esac
done
# An NVIDIA driver (its kernel module, or its user-space library) means a GPU
# machine: the GPU runtime is installed there without asking.
if [[ -e /proc/driver/nvidia/version ]] || ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
  WANT_GPU=1
fi

# --- Debian packages (exact versions of Debian 12 "bookworm") -------------
APT_PACKAGES=(
  "bazel-bootstrap=4.2.3+ds-9"
  "libgrpc++-dev=1.51.1-3+b1"
  "protobuf-compiler-grpc=1.51.1-3+b1"
  "libprotobuf-dev=3.21.12-3+deb12u1"
  "protobuf-compiler=3.21.12-3+deb12u1"
  "libabsl-dev=20220623.1-1+deb12u2"
  "libspdlog-dev=1:1.10.0+ds-0.4"
  "libfmt-dev=9.1.0+ds1-2"
  "libyaml-cpp-dev=0.7.0+dfsg-8+b1"
  "libgmock-dev=1.12.1-0.2"
  "libgtest-dev=1.12.1-0.2"
  "libbenchmark-dev=1.7.1-1"
  "libsqlite3-dev=3.40.1-2+deb12u2"
  # ALE (third_party/ale): its source fetched from PyPI, zlib to build it.
  "curl=7.88.1-10+deb12u15"
  "zlib1g-dev=1:1.2.13.dfsg-1"
  # Prometheus metrics (core library only) and the one HTTP server.
  "prometheus-cpp-dev=1.0.1-1"
  "libprometheus-cpp-core1.0=1.0.1-1"
  "libcpp-httplib-dev=0.11.4+ds-1+deb12u1"
  "libcpp-httplib0.11=0.11.4+ds-1+deb12u1"
  # Gloo's headers for c10d's ProcessGroupGloo (headers only: the symbols
  # come from LibTorch's libtorch_cpu).
  "libgloo-dev=0.0~git20220518.5b14351-3"
  "python3-venv=3.11.2-1+b1"
  # /usr/bin/python: the launcher scripts Bazel writes for Python tests
  # and binaries begin `#!/usr/bin/env python` (then run the venv's
  # interpreter), and the PATH .bazelrc gives actions has no other python.
  "python-is-python3=3.11.2-1+deb12u1"
  # The Gymnasium bridge (envs/gym_bridge): CPython's headers and library to
  # embed, and pybind11's headers.
  "python3-dev=3.11.2-1+b1"
  "libpython3.11-dev=3.11.2-6+deb12u6"
  "pybind11-dev=2.10.3-1"
  # examples/plugin_env builds on its own with CMake (its cmake_build_test).
  "cmake=3.25.1-1"
  # `ip netns` and veth pairs for the two-host tests (tests/two_hosts.sh).
  "iproute2=6.1.0-3"
  # .ci/run checks the C++ formatting with it.
  "clang-format=1:14.0-55.7~deb12u1"
  # libFuzzer targets of fuzz/ (tools/fuzz.sh): clang with ASan, UBSan and
  # libFuzzer's runtime.
  "clang-16=1:16.0.6-15~deb12u1"
  "libfuzzer-16-dev=1:16.0.6-15~deb12u1"
  # Headless browser (and a font) for the telemetry web page test. Debian's
  # security archive keeps only the newest chromium, so this pin follows it
  # (see FOLLOWS_SECURITY below).
  "chromium=156.0.8078.108-1~deb12u1"
  "fonts-dejavu-core=2.37-6"
  # A real Slurm (controller, node daemon, sbatch/squeue/sacct) and MUNGE
  # authentication for deploy/slurm/slurm_test.sh, which runs the daemons
  # itself (no systemd) and submits deploy/slurm/rl_job.sbatch to them.
  "slurmctld=22.05.8-4+deb12u3"
  "slurmd=22.05.8-4+deb12u3"
  "slurm-client=22.05.8-4+deb12u3"
  "slurm-wlm-basic-plugins=22.05.8-4+deb12u3"
  "munge=0.5.15-2+deb12u1"
  "libmunge2=0.5.15-2+deb12u1"
)

# Packages whose old versions leave the archive when a security update comes
# (Debian keeps only the newest chromium in bookworm-security). Their pin is
# taken while the archive holds it; once it is gone, the archive's candidate
# is installed instead and the log says so. chromium: test-only (the web
# page test); libpython3.11-dev: CPython's security releases; curl: its own.
FOLLOWS_SECURITY=" chromium libpython3.11-dev curl "
in_archive() {  # in_archive PKG VERSION: apt's lists hold that version
  apt-cache madison "$1" 2>/dev/null | awk -F'|' '{gsub(/ /, "", $2); print $2}' |
    grep -qxF -- "$2"
}

# What is installed, in one dpkg-query (one call per package cost ~0.3 s,
# most of this script's time when nothing is missing).
declare -A INSTALLED=()
while IFS='|' read -r pkg state; do
  INSTALLED["$pkg"]="$state"
done < <(dpkg-query -W -f='${Package}|${Status} ${Version}\n' \
  "${APT_PACKAGES[@]%%=*}" 2>/dev/null || true)

missing=()
for spec in "${APT_PACKAGES[@]}"; do
  pkg="${spec%%=*}"
  want="${spec#*=}"
  have="${INSTALLED[$pkg]:-}"
  if [[ "$have" == "install ok installed $want" ]]; then continue; fi
  if [[ "$FOLLOWS_SECURITY" == *" $pkg "* && "$have" == "install ok installed "* ]] &&
    ! in_archive "$pkg" "$want"; then
    continue  # an installed newer security release; the pin has left the archive
  fi
  missing+=("$spec")
done
if ((${#missing[@]})); then
  SUDO=""
  if [[ "$(id -u)" != 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -q >/dev/null
  for i in "${!missing[@]}"; do
    pkg="${missing[$i]%%=*}"
    want="${missing[$i]#*=}"
    if [[ "$FOLLOWS_SECURITY" == *" $pkg "* ]] && ! in_archive "$pkg" "$want"; then
      candidate="$(apt-cache policy "$pkg" | awk '/Candidate:/ {print $2}')"
      log "$pkg=$want is no longer in the archive (security updates replace it); installing its candidate $candidate"
      missing[$i]="$pkg=$candidate"
    fi
  done
  log "installing Debian packages: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q \
    --allow-downgrades "${missing[@]}" >/dev/null
else
  log "Debian packages: up to date"
fi

# --- Python virtual environment ---------------------------------------------
VENV="$ROOT/.venv"
REQS="$ROOT/tools/requirements.txt"
TORCH_REQS="$ROOT/tools/requirements-torch.txt"
STAMP="$VENV/.rl_setup_stamp"
want_stamp="$(cat "$REQS" "$TORCH_REQS" | sha256sum | cut -d' ' -f1)"

if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating virtual environment $VENV"
  "${PYTHON:-/usr/bin/python3}" -m venv "$VENV"
fi
if [[ "$(cat "$STAMP" 2>/dev/null || true)" != "$want_stamp" ]]; then
  log "installing Python packages into .venv (first time: ~1 GB download)"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQS"
  # torch is installed without its dependency list: the C++ build needs only
  # libtorch_cpu and the two CUDA runtime libraries it is linked against
  # (listed in requirements-torch.txt), not the ~2.5 GB of cuDNN/cuBLAS/NCCL
  # wheels that GPU training from Python would pull in.
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps \
    -r "$TORCH_REQS"
  echo "$want_stamp" >"$STAMP"
else
  log "Python packages: up to date"
fi

# --- LibTorch's GPU runtime, only on GPU machines or with --gpu ------------
# The binaries link only libtorch_cpu and load libtorch_cuda (and, through
# its RPATH, these wheels) on demand: policy/cuda_runtime.h.
GPU_REQS="$ROOT/tools/requirements-gpu.txt"
GPU_STAMP="$VENV/.rl_gpu_stamp"
if ((WANT_GPU)); then
  want_gpu="$(sha256sum <"$GPU_REQS" | cut -d' ' -f1)"
  if [[ "$(cat "$GPU_STAMP" 2>/dev/null || true)" != "$want_gpu" ]]; then
    log "installing LibTorch's GPU runtime into .venv (~2.6 GB download)"
    "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps \
      -r "$GPU_REQS"
    echo "$want_gpu" >"$GPU_STAMP"
  else
    log "GPU runtime: up to date"
  fi
fi

# --- Python client (rlservice + rlctl), installed into .venv ---------------
# Stubs are generated with Debian's protoc into rlservice/proto, with the
# imports rewritten to that package; regenerated when a .proto changes.
PY_STAMP="$VENV/.rl_client_stamp"
want_py="$(cat proto/*.proto python/pyproject.toml | sha256sum | cut -d' ' -f1)"
if [[ "$(cat "$PY_STAMP" 2>/dev/null || true)" != "$want_py" ]]; then
  log "installing the Python client (rlservice, rlctl) into .venv"
  gen="$(mktemp -d)"
  mkdir -p "$gen/rlservice/proto" python/rlservice/proto
  for f in proto/*.proto; do
    sed 's|import "proto/|import "rlservice/proto/|' "$f" >"$gen/rlservice/proto/$(basename "$f")"
  done
  protoc -I "$gen" --python_out=python --grpc_out=python \
    --plugin=protoc-gen-grpc="$(command -v grpc_python_plugin)" \
    "$gen"/rlservice/proto/*.proto
  touch python/rlservice/proto/__init__.py
  rm -rf "$gen"
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-build-isolation \
    --no-deps -e python
  echo "$want_py" >"$PY_STAMP"
fi

# --- kubectl, to render deploy/k8s offline (//deploy/k8s:manifests_test) ---
# Debian's kubernetes-client (kubectl 1.20, kustomize v2.0.3 built in), pinned
# and unpacked into the venv rather than installed: its /usr/bin/kubectl
# clashes with other kubectl packages (Google Cloud SDK's) on dpkg. It lands
# in .venv/opt/kubernetes-client/usr/bin/kubectl, linked as .venv/bin/kubectl.
KUBECTL_DEB="kubernetes-client=1.20.5+really1.20.2-1.1+deb12u1"
KUBECTL_DIR="$VENV/opt/kubernetes-client"
if [[ "$(cat "$KUBECTL_DIR/.rl_version" 2>/dev/null || true)" != "$KUBECTL_DEB" ]]; then
  log "unpacking $KUBECTL_DEB into $KUBECTL_DIR"
  deb_dir="$(mktemp -d)"
  # Downloaded as the current user (apt's default _apt cannot write here);
  # once more after refreshing apt's lists if they lack the version.
  get_kubectl_deb() {
    (cd "$deb_dir" && apt-get download -q -o APT::Sandbox::User="$(id -un)" \
      "$KUBECTL_DEB" >/dev/null)
  }
  if ! get_kubectl_deb; then
    if [[ "$(id -u)" != 0 ]]; then sudo apt-get update -q >/dev/null
    else apt-get update -q >/dev/null; fi
    get_kubectl_deb
  fi
  rm -rf "$KUBECTL_DIR"
  mkdir -p "$KUBECTL_DIR"
  dpkg-deb -x "$deb_dir"/kubernetes-client_*.deb "$KUBECTL_DIR"
  rm -rf "$deb_dir"
  echo "$KUBECTL_DEB" >"$KUBECTL_DIR/.rl_version"
fi
# Named beside the venv's other commands (rlctl, kubernetes-validate):
# .venv/bin/kubectl, on PATH once the venv is activated.
KUBECTL_LINK="$VENV/bin/kubectl"
KUBECTL_TARGET="../opt/kubernetes-client/usr/bin/kubectl"
if [[ "$(readlink "$KUBECTL_LINK" 2>/dev/null || true)" != "$KUBECTL_TARGET" ]]; then
  ln -sfn "$KUBECTL_TARGET" "$KUBECTL_LINK"
  log "kubectl 1.20 (kustomize v2.0.3): $KUBECTL_LINK"
fi

# --- ALE's C++ source (native Atari, third_party/ale) ----------------------
# ale-py 0.10.1's source distribution from PyPI (the release before the
# installed 0.10.2 wheel, which ships no C++ and has no sdist), its sha256
# pinned, unpacked into .venv/opt; Bazel builds the emulator from it
# offline, with the wheel's ROMs.
ALE_SDIST="ale_py-0.10.1.tar.gz"
ALE_SHA256="3971a8552d2f982f569c87152479901574a9fe86410e5d1a26276e7ffccb59e1"
ALE_URL="https://files.pythonhosted.org/packages/e9/ff/f32cc7aef57955a9d756bd34f8e7e736b60b8359db2928f9dad7e94fdfdc/$ALE_SDIST"
ALE_DIR="$VENV/opt/ale_py-0.10.1"
if [[ "$(cat "$ALE_DIR/.rl_sha256" 2>/dev/null || true)" != "$ALE_SHA256" ]]; then
  log "ALE's C++ source: $ALE_SDIST from PyPI into $ALE_DIR"
  ale_tmp="$(mktemp -d)"
  curl -fsSL --retry 3 -o "$ale_tmp/$ALE_SDIST" "$ALE_URL"
  echo "$ALE_SHA256  $ale_tmp/$ALE_SDIST" | sha256sum -c --quiet -
  rm -rf "$ALE_DIR"
  mkdir -p "$VENV/opt"
  tar -xzf "$ale_tmp/$ALE_SDIST" -C "$VENV/opt"
  rm -rf "$ale_tmp"
  echo "$ALE_SHA256" >"$ALE_DIR/.rl_sha256"
fi

# --- Bazel settings local to this checkout --------------------------------
cat >"$ROOT/.bazelrc.local" <<EOF
# Written by tools/setup.sh; local to this checkout, not committed.
# Python rules use the venv's interpreter (grpcio, protobuf, the client).
build --incompatible_use_python_toolchains=false
build --python_path=$VENV/bin/python3
build --repo_env=RL_VENV=$VENV
# The Gymnasium bridge's embedded interpreter uses the venv (gymnasium).
test --test_env=RL_PYTHON=$VENV/bin/python3
EOF
log "done"
