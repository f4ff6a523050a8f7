#!/usr/bin/env bash
# Starts the PostgreSQL server the persistence/postgres tests run against,
# and prints, as its only line on standard output, the line that points the
# tests at it:
#
#   export ACTORSNAP_TEST_POSTGRES=postgres://postgres@127.0.0.1:5432/actorsnap_test?sslmode=disable ACTORSNAP_TEST_POSTGRES_CA=...
#
# so that a caller runs   eval "$(bash .ci/postgres.sh)"   and then go test.
# The server also speaks TLS, with a certificate for 127.0.0.1 and localhost
# from a throwaway authority of its own, whose certificate
# ACTORSNAP_TEST_POSTGRES_CA names: the tests connect with
# sslmode=verify-full through it. Plain connections stay allowed.
# Progress goes to standard error.
#
# Idempotent: it installs PostgreSQL from the Debian packages only if no
# server binary is there, initialises its own cluster (trust authentication,
# listening on 127.0.0.1 only) only if there is none, starts it only if it is
# not running, and creates the database only if it is missing. A second run
# prints the same line.
#
# The cluster is the script's own, apart from any cluster of the Debian
# packages. Settings, all optional:
#   ACTORSNAP_PG_DATA   its data directory (as root: /var/lib/postgresql/actorsnap-test)
#   ACTORSNAP_PG_PORT   the port to try first (5432); if another server holds
#                       it, the next free port above it is taken
#   ACTORSNAP_PG_WAIT   seconds to wait for the server to accept connections (60)
set -euo pipefail

db=actorsnap_test
port_want=${ACTORSNAP_PG_PORT:-5432}
wait_s=${ACTORSNAP_PG_WAIT:-60}

log() { echo "postgres.sh: $*" >&2; }
die() { log "$*"; exit 1; }

if [ "$(id -u)" = 0 ]; then
  data=${ACTORSNAP_PG_DATA:-/var/lib/postgresql/actorsnap-test}
else
  data=${ACTORSNAP_PG_DATA:-${XDG_CACHE_HOME:-$HOME/.cache}/actorsnap-postgres}
fi
logfile="$data.log"
tlsdir="$data.tls"

# The newest installed server: the Debian packages put each major version's
# binaries in /usr/lib/postgresql/VERSION/bin.
bindir() {
  local d
  for d in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V -r); do
    if [ -x "$d/postgres" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
      echo "$d"
      return 0
    fi
  done
  return 1
}

if ! bin=$(bindir); then
  [ "$(id -u)" = 0 ] || die "no PostgreSQL server installed, and installing one needs root (apt-get install postgresql)"
  log "installing PostgreSQL (apt-get install postgresql)"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -q postgresql >&2; then
    apt-get update -q >&2
    apt-get install -y -q postgresql >&2
  fi
  bin=$(bindir) || die "apt-get installed postgresql, but no server binary is in /usr/lib/postgresql/*/bin"
fi
version=$("$bin/postgres" --version)
log "server: $version ($bin)"

# The server refuses to run as root: as root, run it as the postgres user
# the packages create.
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || die "user postgres is missing (the postgresql packages create it)"
  as_pg() { runuser -u postgres -- "$@"; }
else
  as_pg() { "$@"; }
fi

# A cluster of another major version (left before an upgrade) cannot be
# started by this server; it only ever holds test data.
major=$(basename "$(dirname "$bin")")
if [ -f "$data/PG_VERSION" ] && [ "$(cat "$data/PG_VERSION")" != "$major" ]; then
  log "removing $data: a cluster of version $(cat "$data/PG_VERSION"), the server is $major"
  as_pg "$bin/pg_ctl" -D "$data" stop -m immediate >/dev/null 2>&1 || true
  rm -rf "$data"
fi

if [ ! -f "$data/PG_VERSION" ]; then
  log "initialising a cluster in $data"
  if [ "$(id -u)" = 0 ]; then
    install -d -m 700 -o postgres -g postgres "$data"
    touch "$logfile" && chown postgres:postgres "$logfile"
  else
    mkdir -p "$data" && chmod 700 "$data"
  fi
  as_pg "$bin/initdb" -D "$data" -U postgres -A trust -E UTF8 --no-locale --no-sync >/dev/null
fi

# The server's certificate and key, and the authority that signed them:
# made once, with openssl, beside the data directory. The key must be the
# server user's and private, or the server refuses it.
if [ ! -f "$tlsdir/server.pem" ]; then
  if ! command -v openssl >/dev/null; then
    [ "$(id -u)" = 0 ] || die "openssl is missing, and installing it needs root (apt-get install openssl)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q openssl >&2
  fi
  log "making a throwaway authority and a server certificate in $tlsdir"
  rm -rf "$tlsdir" && mkdir -p "$tlsdir"
  ossl() { openssl "$@" 2>/dev/null >&2; }
  ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
    -subj "/CN=actorsnap test PostgreSQL authority" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
    -keyout "$tlsdir/ca.key" -out "$tlsdir/ca.pem"
  ossl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -subj "/CN=127.0.0.1" -keyout "$tlsdir/server.key" -out "$tlsdir/server.csr"
  printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" "basicConstraints=CA:FALSE" \
    "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" >"$tlsdir/server.ext"
  ossl x509 -req -in "$tlsdir/server.csr" -CA "$tlsdir/ca.pem" -CAkey "$tlsdir/ca.key" \
    -CAcreateserial -days 3650 -extfile "$tlsdir/server.ext" -out "$tlsdir/server.pem"
  rm -f "$tlsdir/ca.key" "$tlsdir/server.csr" "$tlsdir/server.ext" "$tlsdir/ca.srl"
  chmod 755 "$tlsdir" && chmod 644 "$tlsdir/ca.pem" "$tlsdir/server.pem" && chmod 600 "$tlsdir/server.key"
  if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$tlsdir/server.key"; fi
fi

# busy reports whether something accepts TCP connections on 127.0.0.1:$1.
busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
running() { as_pg "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; }

# start starts the server on the first free port from $port_want.
start() {
  port=$port_want
  while busy "$port"; do
    port=$((port + 1))
    [ "$port" -lt $((port_want + 100)) ] || die "no free port in $port_want..$((port_want + 99))"
  done
  log "starting on 127.0.0.1:$port (log: $logfile)"
  as_pg "$bin/pg_ctl" -D "$data" -l "$logfile" -W start \
    -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories='$data' -c ssl=on -c ssl_cert_file='$tlsdir/server.pem' -c ssl_key_file='$tlsdir/server.key'" >/dev/null
}

if running; then
  # Line 4 of postmaster.pid is the port the running server listens on.
  port=$(sed -n 4p "$data/postmaster.pid")
  log "already running on port $port"
  # A server started by an earlier version of this script has no TLS.
  if [ "$("$bin/psql" -X -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc 'SHOW ssl' 2>/dev/null)" = off ]; then
    log "restarting it with TLS"
    as_pg "$bin/pg_ctl" -D "$data" -w stop -m fast >/dev/null
    start
  fi
else
  start
fi

# Wait until it accepts connections. A server found down meanwhile is
# started again: one killed a moment ago (as a CI run's leftovers are) can
# look alive until it is reaped, and its last children can hold its
# shared memory for a moment after.
deadline=$((SECONDS + wait_s))
until "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -t 2; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    tail -n 20 "$logfile" >&2 || true
    die "the server did not accept connections within ${wait_s}s; the end of its log is above"
  fi
  if ! running; then
    log "the server is down"
    start
  fi
  sleep 0.2
done

psql=("$bin/psql" -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1)
if [ "$("${psql[@]}" -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'")" != 1 ]; then
  log "creating database $db"
  # Two runs at once may both try; the loser's error is harmless.
  "${psql[@]}" -c "CREATE DATABASE $db" >&2 ||
    [ "$("${psql[@]}" -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'")" = 1 ]
fi
log "ready"
echo "export ACTORSNAP_TEST_POSTGRES='postgres://postgres@127.0.0.1:$port/$db?sslmode=disable' ACTORSNAP_TEST_POSTGRES_CA='$tlsdir/ca.pem'"
