# Two "hosts" for a test: network namespaces A and B joined by a veth pair,
# made by two_hosts_up and removed on exit (with every process the test
# started there), so that nothing can rely on 127.0.0.1. Sourced by
# tests/multihost_test.sh and tests/chaos/link_chaos_test.sh.
#
# The test defines say() and fail(), then calls
#   two_hosts_up NAME NET BINARY...
# NAME names the temporary directory, NET is the first two octets of the
# namespaces' /24 (one per test, e.g. 10.254), each BINARY a path under the
# bin dir that must exist. It sets HERE, BIN, RLCTL, TAG, NS_A, NS_B,
# ADDR_A, ADDR_B, VETH_A (A's end of the link), DIR and PIDS, and traps
# EXIT; `in_ns NS LOG CMD...` starts CMD in NS with its output in DIR/LOG.
# Root. Environment outside Bazel: RL_BIN_DIR, RL_RLCTL.

two_hosts_up() {
  local name=$1 net=$2
  shift 2
  if [[ -n "${TEST_SRCDIR:-}" ]]; then
    HERE="$TEST_SRCDIR/${TEST_WORKSPACE:-rl_service}"
    BIN="$HERE"
    RLCTL="$HERE/python/rlctl"
  else
    HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    BIN="${RL_BIN_DIR:-$HERE/bazel-bin}"
    RLCTL="${RL_RLCTL:-$HERE/.venv/bin/rlctl}"
  fi
  [[ "$(id -u)" == 0 ]] || fail "needs root (network namespaces)"
  command -v ip >/dev/null || PATH="$PATH:/usr/sbin:/sbin"
  local b
  for b in "$@"; do
    [[ -x "$BIN/$b" ]] || fail "$BIN/$b missing: bazel build //${b%/*}:${b#*/}"
  done

  # Unique names (several runs may share the machine); addresses only
  # inside the namespaces made here.
  TAG="rl${name:0:3}$$"
  NS_A="${TAG}a"
  NS_B="${TAG}b"
  VETH_A="${TAG}va"
  ADDR_A="$net.$(($$ % 250)).1"
  ADDR_B="$net.$(($$ % 250)).2"
  DIR="$(mktemp -d "/tmp/$name.XXXXXX")"
  PIDS=()
  trap two_hosts_down EXIT

  say "namespaces $NS_A ($ADDR_A) and $NS_B ($ADDR_B) joined by a veth pair"
  ip netns add "$NS_A"
  ip netns add "$NS_B"
  ip link add "$VETH_A" type veth peer name "${TAG}vb"
  ip link set "$VETH_A" netns "$NS_A"
  ip link set "${TAG}vb" netns "$NS_B"
  ip -n "$NS_A" addr add "$ADDR_A/24" dev "$VETH_A"
  ip -n "$NS_B" addr add "$ADDR_B/24" dev "${TAG}vb"
  local ns
  for ns in "$NS_A" "$NS_B"; do ip -n "$ns" link set lo up; done
  ip -n "$NS_A" link set "$VETH_A" up
  ip -n "$NS_B" link set "${TAG}vb" up
  ip -n "$NS_B" route get "$ADDR_A" >/dev/null ||
    fail "no route between the namespaces"
}

two_hosts_down() {
  local rc=$? pid ns f
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  sleep 1
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for ns in "$NS_A" "$NS_B"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  if ((rc != 0)); then
    for f in "$DIR"/*.log; do
      echo "----- $f (last 40 lines)"
      tail -n 40 "$f"
    done
  fi
  rm -rf "$DIR"
  exit "$rc"
}

in_ns() {
  local ns=$1 log=$2
  shift 2
  ip netns exec "$ns" "$@" >"$DIR/$log" 2>&1 &
  PIDS+=($!)
}
