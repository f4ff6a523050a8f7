#!/usr/bin/env bash
# Starts the etcd server the cluster/membership tests run against, and
# prints, as its only line on standard output, the line that points the
# tests at it:
#
#   export ACTORSNAP_TEST_ETCD=127.0.0.1:2379
#
# so that a caller runs   eval "$(bash .ci/etcd.sh)"   and then go test.
# Progress goes to standard error.
#
# Idempotent: if an etcd already answers on the port, it only prints the
# line. Otherwise it installs Debian's etcd-server if no etcd is on PATH,
# and starts one member on loopback (client 127.0.0.1:PORT, peer
# 127.0.0.1:PORT+1) in the background with a fresh data directory: it only
# ever holds test data.
#
# Settings, all optional:
#   ACTORSNAP_ETCD_DIR    its directory: data, log and pid file
#                         (${TMPDIR:-/tmp}/actorsnap-etcd-PORT)
#   ACTORSNAP_ETCD_PORT   the client port (2379); the peer port is the next
#   ACTORSNAP_ETCD_WAIT   seconds to wait for the server to be healthy (30)
set -euo pipefail

port=${ACTORSNAP_ETCD_PORT:-2379}
peer_port=$((port + 1))
wait_s=${ACTORSNAP_ETCD_WAIT:-30}
dir=${ACTORSNAP_ETCD_DIR:-${TMPDIR:-/tmp}/actorsnap-etcd-$port}
data="$dir/data"
logfile="$dir/etcd.log"
pidfile="$dir/etcd.pid"

log() { echo "etcd.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# busy reports whether something accepts TCP connections on 127.0.0.1:$1.
busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# healthy reports whether an etcd on 127.0.0.1:$port answers /health with
# "health":"true". Without curl it speaks HTTP over bash's /dev/tcp.
healthy() {
  local body
  if command -v curl >/dev/null 2>&1; then
    body=$(curl -fsS -m 2 "http://127.0.0.1:$port/health" 2>/dev/null) || return 1
  else
    body=$(
      exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
      printf 'GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
      timeout 2 cat <&3
    ) 2>/dev/null || return 1
  fi
  [[ $body == *'"health":"true"'* ]]
}

ready() {
  log "ready on 127.0.0.1:$port"
  echo "export ACTORSNAP_TEST_ETCD=127.0.0.1:$port"
  exit 0
}

if healthy; then
  log "an etcd already answers on 127.0.0.1:$port"
  ready
fi

if busy "$port" || busy "$peer_port"; then
  # Perhaps an etcd of ours still starting: wait for it below rather than
  # start a second one.
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    log "the etcd of $pidfile (pid $(cat "$pidfile")) is running but not yet healthy"
  else
    die "127.0.0.1:$port or :$peer_port is taken by something that is not a healthy etcd; set ACTORSNAP_ETCD_PORT to another port"
  fi
else
  if ! command -v etcd >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || die "no etcd on PATH, and installing one needs root (apt-get install etcd-server)"
    log "installing etcd (apt-get install etcd-server)"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q etcd-server >&2; then
      apt-get update -q >&2
      apt-get install -y -q etcd-server >&2
    fi
    command -v etcd >/dev/null 2>&1 || die "apt-get installed etcd-server, but no etcd is on PATH"
  fi
  log "server: $(etcd --version 2>/dev/null | head -n 1) ($(command -v etcd))"

  # A stale member of ours (killed, or from another port) only ever held
  # test data: start from an empty data directory.
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    log "stopping the stale etcd of $pidfile (pid $(cat "$pidfile"))"
    kill "$(cat "$pidfile")" 2>/dev/null || true
  fi
  mkdir -p "$dir"
  rm -rf "$data"
  log "starting on 127.0.0.1:$port (peer :$peer_port, data $data, log: $logfile)"
  # setsid and no inherited descriptors: the server outlives this script and
  # does not hold the caller's $(...) pipe open.
  setsid etcd \
    --name actorsnap-test \
    --data-dir "$data" \
    --listen-client-urls "http://127.0.0.1:$port" \
    --advertise-client-urls "http://127.0.0.1:$port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "actorsnap-test=http://127.0.0.1:$peer_port" \
    --initial-cluster-state new \
    >"$logfile" 2>&1 </dev/null &
  echo $! >"$pidfile"
fi

# Wait until it is healthy, with a deadline.
deadline=$((SECONDS + wait_s))
until healthy; do
  if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    tail -n 20 "$logfile" >&2 || true
    die "etcd exited; the end of its log is above"
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    tail -n 20 "$logfile" >&2 || true
    die "etcd was not healthy within ${wait_s}s; the end of its log is above"
  fi
  sleep 0.2
done
ready
