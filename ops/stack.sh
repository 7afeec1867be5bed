#!/usr/bin/env bash
# Local Kafka + Redis stack for neardup's tests and development, without Docker.
#
#   ops/stack.sh up                     install what is missing, start it all, wait until it answers
#   ops/stack.sh down                   stop them all (safe when nothing runs)
#   ops/stack.sh status                 show what runs (exit 0 only if all of it runs)
#   ops/stack.sh restart-kafka          stop and start Kafka, keeping its data
#   ops/stack.sh restart-redis          stop and start Redis, keeping its data (AOF, see below)
#   ops/stack.sh restart-redis-cluster  stop and start the cluster's nodes, keeping data and slots
#   ops/stack.sh env                    print `export NEARDUP_...=` lines (endpoints, users, certs)
#   ops/stack.sh install                only install / fetch what is missing (Redis, openssl, jars)
#
# Kafka: Apache Kafka 4.x, one KRaft node (broker + controller in one process). Its jars come
# from Maven (ops/kafka/pom.xml) and are cached under ops/.cache/; it runs as
#   java -cp '<jars>/*' kafka.Kafka server.properties
# with these listeners, all on 127.0.0.1:
#   PLAINTEXT       9092  no authentication: inter-broker, the tools, the tests' own clients
#   CONTROLLER      9093  KRaft controller
#   SASL_PLAINTEXT  9094  SASL with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
#   SASL_SSL        9095  the same over TLS, with the server certificate below
# One SASL user (`neardup`): PLAIN checks it against the JAAS config in server.properties, the
# SCRAM mechanisms against credentials in the KRaft metadata (written when the storage is
# formatted and, if a login shows them missing or stale, again with the ConfigCommand). `up`
# returns once a SCRAM login over SASL_SSL succeeds. There is no authorizer: any logged-in user
# may do anything; a wrong password is refused.
#
# Redis: Debian's redis-server package, run as our own daemons (not the system service):
#   main server     6379 plain and 6380 TLS (a client certificate from the CA below is required)
#   Redis Cluster   7000, 7001, 7002: three primaries, no replicas, no password (cluster bus
#                   ports: each port + 10000), created once with `redis-cli --cluster create`;
#                   each node's nodes.conf keeps the cluster across restarts
# Users of the main server (users.acl in the state dir): `default`, without a password and with
# all rights (as before), and the ACL user `neardup` with what the index needs: keys ~nd:*,
# read, write, keyspace, scripting, transaction and connection commands, none of @dangerous
# but INFO, MEMORY, SCAN, TIME and SELECT.
# Persistence: every Redis writes an append-only file (AOF) into the state dir:
#   --appendonly yes --appendfsync everysec --aof-use-rdb-preamble yes
# so restart-redis and restart-redis-cluster keep the data (a restart waits until the AOF is
# loaded). `everysec` fsyncs once a second in the background: a crash of Redis or the machine
# loses at most the last second of writes. `--appendfsync always` loses none, at the cost of an
# fsync per write (far lower throughput); NEARDUP_REDIS_ARGS='--appendonly no' turns it off.
#
# TLS: on the first `up`, openssl makes a test CA and, signed by it, a server certificate
# (CN 127.0.0.1, subjectAltName IP:127.0.0.1, DNS:localhost; clients verify the host name) and
# a client certificate with an unencrypted key, all PEM, in <state>/tls; later `up`s reuse them.
# Passwords of the two users are random on the first `up` and kept in <state>/secrets (or
# taken from NEARDUP_STACK_REDIS_PASSWORD / NEARDUP_STACK_KAFKA_PASSWORD, which then replace the
# kept ones).
#
# `env` prints, shell-quoted, NEARDUP_BOOTSTRAP_SERVERS (PLAINTEXT) and NEARDUP_REDIS_URL (plain
# port, default user), and for the secured endpoints NEARDUP_STACK_REDIS_USER,
# NEARDUP_STACK_REDIS_PASSWORD, NEARDUP_STACK_REDIS_TLS_URL (rediss://127.0.0.1:6380/0),
# NEARDUP_STACK_CA_FILE, NEARDUP_STACK_CLIENT_CERT, NEARDUP_STACK_CLIENT_KEY (absolute paths),
# NEARDUP_STACK_KAFKA_SASL (127.0.0.1:9094), NEARDUP_STACK_KAFKA_SASL_SSL (127.0.0.1:9095),
# NEARDUP_STACK_KAFKA_USER, NEARDUP_STACK_KAFKA_PASSWORD and, with the cluster on,
# NEARDUP_STACK_REDIS_CLUSTER_URL (redis://127.0.0.1:7000/0). It needs an `up` to have made the
# passwords and certificates.
#
# Environment (all optional):
#   NEARDUP_STACK_DIR                 runtime state: data, logs, pid files, certificates,
#                                     passwords                              (/tmp/neardup-stack)
#   NEARDUP_STACK_CACHE               where the Kafka jars are kept          (ops/.cache)
#   NEARDUP_KAFKA_PORT                PLAINTEXT listener on 127.0.0.1        (9092)
#   NEARDUP_KAFKA_CONTROLLER_PORT     KRaft controller listener              (9093)
#   NEARDUP_KAFKA_SASL_PORT           SASL_PLAINTEXT listener                (9094)
#   NEARDUP_KAFKA_SASL_SSL_PORT       SASL_SSL listener                      (9095)
#   NEARDUP_STACK_KAFKA_USER          the SASL user                          (neardup)
#   NEARDUP_STACK_KAFKA_PASSWORD      its password, of letters, digits and ._~@%+:/!-
#                                                                            (random, kept)
#   NEARDUP_KAFKA_HEAP_OPTS           broker heap                            (-Xms256m -Xmx512m)
#   NEARDUP_KAFKA_JVM_OPTS            other broker JVM flags                 (see below)
#   NEARDUP_KAFKA_EXTRA_CONFIG        extra server.properties lines, appended last (they win)
#   NEARDUP_KAFKA_CLUSTER_ID          cluster id used when formatting fresh storage (random)
#   NEARDUP_KAFKA_START_TIMEOUT       seconds to wait for the broker         (120)
#   NEARDUP_REDIS_PORT                Redis port on 127.0.0.1                (6379)
#   NEARDUP_REDIS_TLS_PORT            Redis TLS port on 127.0.0.1            (6380)
#   NEARDUP_STACK_REDIS_USER          the ACL user                           (neardup)
#   NEARDUP_STACK_REDIS_PASSWORD      its password                           (random, kept)
#   NEARDUP_REDIS_ARGS                extra redis-server arguments for the main server, shell-
#                                     quoted, after ours (they win), e.g. '--appendonly no'
#                                     (no persistence) or '--maxmemory 64mb'
#   NEARDUP_STACK_CLUSTER             1: up starts the Redis Cluster; 0: it does not (1)
#   NEARDUP_REDIS_CLUSTER_PORT        first of the cluster's three ports     (7000)
#   NEARDUP_REDIS_CLUSTER_BUS_PORT    first of its three cluster bus ports   (cluster port + 10000)
#   NEARDUP_REDIS_START_TIMEOUT       seconds to wait for each Redis (AOF loaded) and for
#                                     the cluster's cluster_state:ok         (30)
#   NEARDUP_STOP_TIMEOUT              seconds between SIGTERM and SIGKILL    (30)
# Every subcommand reads these from the environment at the time it runs, so use the same
# values for `up`, `restart-*`, `env` and `status`. Progress goes to stderr. `up` is idempotent:
# what runs with the same configuration is left alone; a server that runs with another one (an
# older version of this script, other ports, a new Kafka password) is restarted; a new Redis
# password is applied with ACL LOAD.
set -euo pipefail

OPS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
HOST=127.0.0.1

STATE_DIR="${NEARDUP_STACK_DIR:-/tmp/neardup-stack}"
[[ "$STATE_DIR" == /* ]] || STATE_DIR="$PWD/$STATE_DIR"   # env prints absolute paths
CACHE_DIR="${NEARDUP_STACK_CACHE:-$OPS_DIR/.cache}"

KAFKA_PORT="${NEARDUP_KAFKA_PORT:-9092}"
KAFKA_CONTROLLER_PORT="${NEARDUP_KAFKA_CONTROLLER_PORT:-9093}"
KAFKA_SASL_PORT="${NEARDUP_KAFKA_SASL_PORT:-9094}"
KAFKA_SASL_SSL_PORT="${NEARDUP_KAFKA_SASL_SSL_PORT:-9095}"
KAFKA_HEAP_OPTS="${NEARDUP_KAFKA_HEAP_OPTS:--Xms256m -Xmx512m}"
# Serial GC and a small thread stack suit a 512m broker on 2 cores; CDS is on by default.
KAFKA_JVM_OPTS="${NEARDUP_KAFKA_JVM_OPTS:--XX:+UseSerialGC -Xss512k -XX:+ExitOnOutOfMemoryError -XX:-UsePerfData -Djava.awt.headless=true -Djava.net.preferIPv4Stack=true}"
KAFKA_START_TIMEOUT="${NEARDUP_KAFKA_START_TIMEOUT:-120}"
SASL_MECHANISMS=(PLAIN SCRAM-SHA-256 SCRAM-SHA-512)

REDIS_PORT="${NEARDUP_REDIS_PORT:-6379}"
REDIS_TLS_PORT="${NEARDUP_REDIS_TLS_PORT:-6380}"
REDIS_START_TIMEOUT="${NEARDUP_REDIS_START_TIMEOUT:-30}"

CLUSTER_ENABLED="${NEARDUP_STACK_CLUSTER:-1}"
CLUSTER_PORT="${NEARDUP_REDIS_CLUSTER_PORT:-7000}"
CLUSTER_BUS_PORT="${NEARDUP_REDIS_CLUSTER_BUS_PORT:-}"
CLUSTER_SIZE=3

STOP_TIMEOUT="${NEARDUP_STOP_TIMEOUT:-30}"

KAFKA_POM="$OPS_DIR/kafka/pom.xml"
KAFKA_STATE="$STATE_DIR/kafka"
KAFKA_DATA="$KAFKA_STATE/data"
KAFKA_LOGS="$KAFKA_STATE/logs"
KAFKA_PROPS="$KAFKA_STATE/server.properties"
KAFKA_PID="$KAFKA_STATE/kafka.pid"
KAFKA_READY="$KAFKA_STATE/ready.pid"            # pid of the broker that passed the login check
KAFKA_CLIENT_PROPS="$KAFKA_STATE/client-sasl-ssl.properties"
REDIS_STATE="$STATE_DIR/redis"
REDIS_PID="$REDIS_STATE/redis.pid"
REDIS_LOG="$REDIS_STATE/redis.log"
REDIS_ACL="$REDIS_STATE/users.acl"
CLUSTER_STATE="$STATE_DIR/redis-cluster"
TLS_DIR="$STATE_DIR/tls"
CA_CERT="$TLS_DIR/ca.crt"
SERVER_CERT="$TLS_DIR/server.crt"
SERVER_KEY="$TLS_DIR/server.key"
CLIENT_CERT="$TLS_DIR/client.crt"
CLIENT_KEY="$TLS_DIR/client.key"
SECRETS_DIR="$STATE_DIR/secrets"

# ---------------------------------------------------------------- helpers

log() { printf '[stack] %s\n' "$*" >&2; }
die() { printf '[stack] ERROR: %s\n' "$*" >&2; exit 1; }

# show the last lines of a log file on stderr (used when something fails)
show_tail() {
  local file="$1" n="${2:-60}"
  if [[ -s "$file" ]]; then
    printf '[stack] ---- last %s lines of %s ----\n' "$n" "$file" >&2
    tail -n "$n" "$file" >&2 || true
    printf '[stack] ---- end of %s ----\n' "$file" >&2
  else
    printf '[stack] (%s is empty or missing)\n' "$file" >&2
  fi
}

is_port() { [[ "$1" =~ ^[0-9]+$ ]] && (( $1 > 0 && $1 < 65536 )); }

# dies unless every argument NAME=PORT is a valid port and no two are equal
check_ports() {
  local spec name port seen=" "
  for spec in "$@"; do
    name="${spec%%=*}" port="${spec#*=}"
    is_port "$port" || die "bad $name: '$port' (a port number is 1-65535)"
    [[ "$seen" != *" $port "* ]] || die "$name=$port: that port is already used by another of the stack's listeners"
    seen+="$port "
  done
}

# true if something accepts TCP connections on 127.0.0.1:$1 (bash's /dev/tcp, no nc needed)
port_open() {
  local port="$1"
  if command -v timeout >/dev/null 2>&1; then
    timeout 2 bash -c "exec 3<>/dev/tcp/$HOST/$port" 2>/dev/null
  else
    (exec 3<>"/dev/tcp/$HOST/$port") 2>/dev/null
  fi
}

# true if process $1 exists and has not exited (an exited daemon stays a zombie until init,
# its parent, reaps it, which some container inits do only every second or two)
alive() {
  kill -0 "$1" 2>/dev/null || return 1
  local state=""
  [[ -r "/proc/$1/status" ]] && state="$(awk '/^State:/ { print $2 }' "/proc/$1/status" 2>/dev/null || true)"
  [[ "$state" != Z ]]
}

# prints the pid in pidfile $1 if that process is alive and its command line contains $2
running_pid() {
  local pidfile="$1" marker="$2" pid
  [[ -f "$pidfile" ]] || return 1
  pid="$(tr -dc '0-9' <"$pidfile" 2>/dev/null || true)"
  [[ -n "$pid" ]] || return 1
  alive "$pid" || return 1
  # guard against a recycled pid (e.g. a stale pid file after a reboot)
  if [[ -r "/proc/$pid/cmdline" ]]; then
    # (grep without -q reads all input: no SIGPIPE for the writer under pipefail)
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -F -- "$marker" >/dev/null || return 1
  fi
  printf '%s\n' "$pid"
}

# stop the process in pidfile: SIGTERM, wait up to STOP_TIMEOUT s, then SIGKILL
stop_pidfile() {
  local name="$1" pidfile="$2" marker="$3" pid i
  if ! pid="$(running_pid "$pidfile" "$marker")"; then
    rm -f "$pidfile"
    log "$name is not running"
    return 0
  fi
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
    alive "$pid" || break
    sleep 0.1
  done
  if alive "$pid"; then
    log "$name did not stop within ${STOP_TIMEOUT}s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
      alive "$pid" || break
      sleep 0.2
    done
    alive "$pid" && die "could not kill $name (pid $pid)"
  fi
  rm -f "$pidfile"
  log "$name stopped"
}

# serialize concurrent calls of this script on the same state dir
take_lock() {
  mkdir -p "$STATE_DIR"
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$STATE_DIR/.stack.lock"
    flock -w 900 9 || die "another ops/stack.sh is still running on $STATE_DIR (lock $STATE_DIR/.stack.lock)"
  fi
}

# a word quoted for sh: 'it'\''s'
shell_quote() {
  local s="$1" q="'\\''"
  printf "'%s'" "${s//\'/$q}"
}

sha256_of() { sha256sum | cut -c1-64; }
# ---------------------------------------------------------------- installing

APT_UPDATED=0
as_root() {
  if [[ "$(id -u)" -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    die "need root (or sudo) to run: $*"
  fi
}

apt_install() {
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install these yourself: $*"
  mkdir -p "$STATE_DIR"
  local aptlog="$STATE_DIR/apt.log"
  if [[ "$APT_UPDATED" -eq 0 ]]; then
    log "apt-get update (log: $aptlog)"
    if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -q >"$aptlog" 2>&1 </dev/null; then
      show_tail "$aptlog" 30
      die "apt-get update failed"
    fi
    APT_UPDATED=1
  fi
  log "apt-get install $* (log: $aptlog)"
  # Keep the packages' own services from being started (we run our own daemons): a
  # policy-rc.d that refuses is honoured by invoke-rc.d and deb-systemd-invoke.
  local policy=/usr/sbin/policy-rc.d made_policy=0
  if [[ ! -e "$policy" ]]; then
    as_root sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod 755 $policy" && made_policy=1
  fi
  local rc=0
  as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "$@" \
    >>"$aptlog" 2>&1 </dev/null || rc=$?
  if [[ "$made_policy" -eq 1 ]]; then as_root rm -f "$policy"; fi
  if [[ "$rc" -ne 0 ]]; then
    show_tail "$aptlog" 30
    die "apt-get install $* failed"
  fi
}

java_major() {
  # prints e.g. 17 for 'openjdk version "17.0.15"'
  { java -version 2>&1 || true; } | sed -n 's/.*version "\([0-9][0-9]*\).*/\1/p' | sed -n 1p
}

ensure_java() {
  local major=""
  if command -v java >/dev/null 2>&1; then major="$(java_major)"; fi
  if [[ -z "$major" || "$major" -lt 17 ]]; then
    log "Java 17+ is needed for Kafka 4 (found: ${major:-none})"
    apt_install openjdk-17-jre-headless
    major="$(java_major)"
    [[ -n "$major" && "$major" -ge 17 ]] || die "java 17+ still not found on PATH"
  fi
}

ensure_maven() {
  command -v mvn >/dev/null 2>&1 || apt_install maven
}

ensure_redis() {
  if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    apt_install redis-server
  fi
  command -v redis-server >/dev/null 2>&1 || die "redis-server not found after installing it"
}

ensure_openssl() {
  command -v openssl >/dev/null 2>&1 || apt_install openssl
  command -v openssl >/dev/null 2>&1 || die "openssl not found after installing it"
}

# KAFKA_LIB is the directory of broker jars; the cache key is a hash of pom.xml
kafka_lib_dir() {
  local key
  key="$(sha256sum "$KAFKA_POM" | cut -c1-12)"
  printf '%s/kafka-libs-%s\n' "$CACHE_DIR" "$key"
}

ensure_kafka_libs() {
  KAFKA_LIB="$(kafka_lib_dir)"
  if [[ -f "$KAFKA_LIB/.complete" ]]; then
    return 0
  fi
  ensure_java
  ensure_maven
  mkdir -p "$CACHE_DIR"
  local tmp="$KAFKA_LIB.tmp.$$" mvnlog="$CACHE_DIR/mvn-copy.log" attempt ok=0
  local version
  version="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$KAFKA_POM" | sed -n 1p)"
  log "fetching Kafka ${version:-?} jars with Maven (log: $mvnlog)"
  for attempt in 1 2 3; do
    rm -rf "$tmp"
    if mvn -B -ntp -f "$KAFKA_POM" -Dkafka.lib.dir="$tmp" dependency:copy-dependencies \
        >"$mvnlog" 2>&1 </dev/null; then
      ok=1
      break
    fi
    log "Maven attempt $attempt failed"
    sleep $((attempt * 3))
  done
  if [[ "$ok" -ne 1 ]]; then
    show_tail "$mvnlog" 40
    rm -rf "$tmp"
    die "could not fetch the Kafka jars with Maven"
  fi
  compgen -G "$tmp/kafka_2.13-*.jar" >/dev/null || { rm -rf "$tmp"; die "Maven copied no kafka_2.13 jar into $tmp"; }
  touch "$tmp/.complete"
  rm -rf "$KAFKA_LIB"
  mv "$tmp" "$KAFKA_LIB"
  log "Kafka jars cached in $KAFKA_LIB ($(find "$KAFKA_LIB" -name '*.jar' | wc -l) jars)"
}

# ---------------------------------------------------------------- TLS and credentials

# true if the CA, the server and the client certificate exist, chain to the CA and are valid
# for at least another week
tls_ok() {
  local f
  for f in "$CA_CERT" "$TLS_DIR/ca.key" "$SERVER_CERT" "$SERVER_KEY" "$CLIENT_CERT" "$CLIENT_KEY"; do
    [[ -s "$f" ]] || return 1
  done
  openssl verify -CAfile "$CA_CERT" "$SERVER_CERT" "$CLIENT_CERT" >/dev/null 2>&1 || return 1
  for f in "$CA_CERT" "$SERVER_CERT" "$CLIENT_CERT"; do
    openssl x509 -in "$f" -noout -checkend 604800 >/dev/null 2>&1 || return 1
  done
}

# a key and a certificate signed by the CA in the current directory: make_leaf NAME SUBJECT EXTENSIONS
make_leaf() {
  local name="$1" subject="$2" ext="$3"
  openssl req -config openssl.cnf -new -newkey rsa:2048 -nodes -subj "$subject" \
    -keyout "$name.key" -out "$name.csr" || return 1
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -CAserial ca.srl \
    -days 825 -sha256 -extfile openssl.cnf -extensions "$ext" -out "$name.crt" || return 1
  rm -f "$name.csr"
}

# the test CA, the server and the client certificate, in the current directory (PEM; the keys
# unencrypted PKCS#8, readable by the owner only)
make_certs() {
  cat >openssl.cnf <<CNF || return 1
# made by ops/stack.sh: extensions of the stack's test certificates
[req]
distinguished_name = dn
prompt = no
[dn]
CN = neardup-stack
[ca_ext]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
[server_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:$HOST, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
[client_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
CNF
  openssl req -config openssl.cnf -x509 -new -newkey rsa:2048 -nodes -sha256 -days 3650 \
    -subj "/CN=neardup-stack test CA" -extensions ca_ext -keyout ca.key -out ca.crt || return 1
  make_leaf server "/CN=$HOST" server_ext || return 1
  make_leaf client "/CN=neardup-stack client" client_ext || return 1
  chmod 644 ca.crt server.crt client.crt
}

# the CA and certificates in $TLS_DIR: made on the first run, reused while they are valid
ensure_tls() {
  ensure_openssl
  tls_ok && return 0
  mkdir -p "$STATE_DIR"
  local tmp="$TLS_DIR.tmp.$$" out="$STATE_DIR/tls.log" rc=0
  rm -rf "$tmp"
  mkdir -p "$tmp"
  log "making a test CA and certificates in $TLS_DIR (log: $out)"
  (umask 077 && cd "$tmp" && make_certs) >"$out" 2>&1 </dev/null || rc=$?
  if [[ "$rc" -ne 0 ]]; then
    show_tail "$out" 30
    rm -rf "$tmp"
    die "could not make the test certificates with openssl"
  fi
  rm -rf "$TLS_DIR"
  mv "$tmp" "$TLS_DIR"
  tls_ok || die "the certificates just made in $TLS_DIR do not verify against their CA"
}

# digest of the certificates and keys, so that a server started with other ones is restarted
tls_digest() {
  cat "$CA_CERT" "$SERVER_CERT" "$SERVER_KEY" | sha256_of
}

random_password() {
  # 24 characters from [A-Za-z0-9_-] (144 random bits)
  head -c 18 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n'
}

# keep_secret NAME GIVEN DEFAULT: sets REPLY to GIVEN if not empty, else to the value kept in
# $SECRETS_DIR/NAME, else to DEFAULT; keeps the result there (owner-only)
keep_secret() {
  local name="$1" given="$2" default="$3" file="$SECRETS_DIR/$1" value
  if [[ -n "$given" ]]; then
    value="$given"
  elif [[ -s "$file" ]]; then
    value="$(cat "$file")"
  else
    value="$default"
  fi
  if [[ ! -s "$file" || "$(cat "$file")" != "$value" ]]; then
    (umask 077 && mkdir -p "$SECRETS_DIR" && printf '%s\n' "$value" >"$file.tmp.$$") ||
      die "cannot write $file.tmp.$$"
    mv "$file.tmp.$$" "$file"
  fi
  REPLY="$value"
}

USER_RE='^[A-Za-z][A-Za-z0-9._-]{0,63}$'
# what survives unquoted in JAAS, in server.properties and in the ConfigCommand's SCRAM syntax
KAFKA_PASSWORD_RE='^[A-Za-z0-9._~@%+:/!-]{1,128}$'

# REDIS_USER, REDIS_PASSWORD, KAFKA_USER, KAFKA_PASSWORD: from NEARDUP_STACK_*, else as kept
# in the state dir, else the defaults (user neardup, a random password)
load_credentials() {
  local v
  v="${NEARDUP_STACK_REDIS_USER:-}"
  [[ -z "$v" || "$v" =~ $USER_RE ]] || die "NEARDUP_STACK_REDIS_USER must match $USER_RE"
  v="${NEARDUP_STACK_KAFKA_USER:-}"
  [[ -z "$v" || "$v" =~ $USER_RE ]] || die "NEARDUP_STACK_KAFKA_USER must match $USER_RE"
  v="${NEARDUP_STACK_REDIS_PASSWORD:-}"
  [[ "$v" != *$'\n'* ]] || die "NEARDUP_STACK_REDIS_PASSWORD must be one line"
  v="${NEARDUP_STACK_KAFKA_PASSWORD:-}"
  [[ -z "$v" || "$v" =~ $KAFKA_PASSWORD_RE ]] ||
    die "NEARDUP_STACK_KAFKA_PASSWORD may only have letters, digits and ._~@%+:/!- (1 to 128 of them)"

  keep_secret redis-user "${NEARDUP_STACK_REDIS_USER:-}" neardup
  REDIS_USER="$REPLY"
  keep_secret redis-password "${NEARDUP_STACK_REDIS_PASSWORD:-}" "$(random_password)"
  REDIS_PASSWORD="$REPLY"
  keep_secret kafka-user "${NEARDUP_STACK_KAFKA_USER:-}" neardup
  KAFKA_USER="$REPLY"
  keep_secret kafka-password "${NEARDUP_STACK_KAFKA_PASSWORD:-}" "$(random_password)"
  KAFKA_PASSWORD="$REPLY"
  [[ "$KAFKA_USER" =~ $USER_RE && "$REDIS_USER" =~ $USER_RE ]] ||
    die "a user name kept in $SECRETS_DIR is malformed; remove that directory and run up again"
  [[ "$KAFKA_PASSWORD" =~ $KAFKA_PASSWORD_RE ]] ||
    die "the Kafka password kept in $SECRETS_DIR is malformed; remove $SECRETS_DIR/kafka-password"
}

# ---------------------------------------------------------------- Kafka

kafka_java() {
  # run a Kafka tool class with the cached jars; quiet logging on stderr
  java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData \
    -Dlog4j2.configurationFile="$OPS_DIR/kafka/log4j2-tools.xml" \
    -cp "$KAFKA_LIB/*" "$@"
}

new_cluster_id() {
  # a random base64url UUID as Kafka's Uuid.randomUuid() prints it (22 chars, not starting with '-')
  local id
  while :; do
    id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
    [[ "$id" != -* && ${#id} -eq 22 ]] && break
  done
  printf '%s\n' "$id"
}

# a PEM file as one properties value: its newlines as \n escapes
pem_value() {
  awk '{ printf "%s\\n", $0 }' "$1"
}

# write_kafka_config FILE: the broker's server.properties (it holds the SASL password and the
# server key: owner-only)
write_kafka_config() {
  local file="$1" listener
  mkdir -p "$KAFKA_DATA" "$KAFKA_LOGS"
  (umask 077 && : >"$file") || die "cannot write $file"
  {
    cat <<EOF
# generated by ops/stack.sh on each start; edit the script (or NEARDUP_KAFKA_EXTRA_CONFIG) instead
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$HOST:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://$HOST:$KAFKA_PORT,CONTROLLER://$HOST:$KAFKA_CONTROLLER_PORT,SASL_PLAINTEXT://$HOST:$KAFKA_SASL_PORT,SASL_SSL://$HOST:$KAFKA_SASL_SSL_PORT
advertised.listeners=PLAINTEXT://$HOST:$KAFKA_PORT,SASL_PLAINTEXT://$HOST:$KAFKA_SASL_PORT,SASL_SSL://$HOST:$KAFKA_SASL_SSL_PORT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$KAFKA_DATA

# SASL on SASL_PLAINTEXT and SASL_SSL: one user, for PLAIN in the JAAS configs below, for SCRAM
# in the KRaft metadata (ops/stack.sh writes those credentials). No authorizer: a logged-in
# user may do anything.
sasl.enabled.mechanisms=$(IFS=,; printf '%s' "${SASL_MECHANISMS[*]}")
EOF
    for listener in sasl_plaintext sasl_ssl; do
      printf 'listener.name.%s.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_%s="%s";\n' \
        "$listener" "$KAFKA_USER" "$KAFKA_PASSWORD"
      printf 'listener.name.%s.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n' "$listener"
      printf 'listener.name.%s.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n' "$listener"
    done
    printf '\n# TLS of SASL_SSL: the stack'"'"'s server certificate (PEM, inline); no client certificates\n'
    printf 'listener.name.sasl_ssl.ssl.keystore.type=PEM\n'
    printf 'listener.name.sasl_ssl.ssl.keystore.certificate.chain=%s\n' "$(pem_value "$SERVER_CERT")"
    printf 'listener.name.sasl_ssl.ssl.keystore.key=%s\n' "$(pem_value "$SERVER_KEY")"
    printf 'listener.name.sasl_ssl.ssl.truststore.type=PEM\n'
    printf 'listener.name.sasl_ssl.ssl.truststore.certificates=%s\n' "$(pem_value "$CA_CERT")"
    printf 'listener.name.sasl_ssl.ssl.client.auth=none\n'
    cat <<EOF

# single node: everything replicated once
auto.create.topics.enable=true
delete.topic.enable=true
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# after an unclean stop (kill -9) the restarted node must wait for its old broker session to
# expire before it can register again: keep that short (defaults: 2000 / 9000 ms)
broker.heartbeat.interval.ms=1000
broker.session.timeout.ms=4000

# small and quick, for tests on a 2-core machine
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
background.threads=4
log.segment.bytes=16777216
log.retention.hours=24
log.retention.check.interval.ms=60000
log.cleaner.threads=1
log.cleaner.dedupe.buffer.size=16777216
EOF
    if [[ -n "${NEARDUP_KAFKA_EXTRA_CONFIG:-}" ]]; then
      printf '\n# NEARDUP_KAFKA_EXTRA_CONFIG\n%s\n' "$NEARDUP_KAFKA_EXTRA_CONFIG"
    fi
  } >>"$file"
}

# the SASL user's SCRAM credential for MECHANISM as StorageTool --add-scram takes it
scram_credential() {
  printf '%s=[name=%s,password=%s]' "$1" "$KAFKA_USER" "$KAFKA_PASSWORD"
}

format_kafka_storage() {
  if [[ -f "$KAFKA_DATA/meta.properties" ]]; then
    return 0
  fi
  local cid="${NEARDUP_KAFKA_CLUSTER_ID:-}"
  if [[ -z "$cid" && -s "$KAFKA_STATE/cluster.id" ]]; then cid="$(cat "$KAFKA_STATE/cluster.id")"; fi
  [[ -n "$cid" ]] || cid="$(new_cluster_id)"
  printf '%s\n' "$cid" >"$KAFKA_STATE/cluster.id"
  log "formatting Kafka storage in $KAFKA_DATA (cluster id $cid, SCRAM user '$KAFKA_USER')"
  local out="$KAFKA_LOGS/storage-format.log"
  # the SCRAM credentials go into the fresh metadata log, so the first start needs no ConfigCommand
  if ! kafka_java kafka.tools.StorageTool format --ignore-formatted -t "$cid" -c "$KAFKA_PROPS" \
      --add-scram "$(scram_credential SCRAM-SHA-256)" --add-scram "$(scram_credential SCRAM-SHA-512)" \
      >"$out" 2>&1 </dev/null; then
    show_tail "$out" 40
    die "formatting Kafka storage failed"
  fi
}

# the client config of the readiness check: SCRAM-SHA-512 over SASL_SSL, verifying the server's
# certificate and host name against the stack's CA
write_kafka_client_config() {
  (umask 077 && cat >"$KAFKA_CLIENT_PROPS") <<EOF || die "cannot write $KAFKA_CLIENT_PROPS"
# generated by ops/stack.sh: its login check over SASL_SSL
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="$KAFKA_USER" password="$KAFKA_PASSWORD";
ssl.truststore.type=PEM
ssl.truststore.location=$CA_CERT
ssl.endpoint.identification.algorithm=https
request.timeout.ms=10000
default.api.timeout.ms=20000
EOF
}

# a SCRAM login over SASL_SSL (TLS with host name check) and a metadata request (list topics)
kafka_login_ok() {
  timeout 45 java -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData \
    -Dlog4j2.configurationFile="$OPS_DIR/kafka/log4j2-tools.xml" \
    -cp "$KAFKA_LIB/*" org.apache.kafka.tools.TopicCommand \
    --bootstrap-server "$HOST:$KAFKA_SASL_SSL_PORT" --command-config "$KAFKA_CLIENT_PROPS" \
    --list >"$KAFKA_LOGS/readiness-check.log" 2>&1 </dev/null
}

# (re)write the user's SCRAM credentials through the PLAINTEXT listener; idempotent. One
# mechanism per request (Kafka 4.2 refuses both in one request: "A user credential cannot be
# altered twice in the same request"), from a file rather than the command line (where anyone
# could read the password).
kafka_set_scram() {
  local out="$KAFKA_LOGS/scram-credentials.log" file="$KAFKA_STATE/scram.properties" mechanism rc=0
  : >"$out"
  for mechanism in SCRAM-SHA-256 SCRAM-SHA-512; do
    (umask 077 && printf '%s=password=%s\n' "$mechanism" "$KAFKA_PASSWORD" >"$file") ||
      die "cannot write $file"
    timeout 60 java -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData \
      -Dlog4j2.configurationFile="$OPS_DIR/kafka/log4j2-tools.xml" \
      -cp "$KAFKA_LIB/*" kafka.admin.ConfigCommand --bootstrap-server "$HOST:$KAFKA_PORT" \
      --alter --entity-type users --entity-name "$KAFKA_USER" --add-config-file "$file" \
      >>"$out" 2>&1 </dev/null || rc=$?
    rm -f "$file"
    [[ "$rc" -eq 0 ]] || return "$rc"
  done
}

KAFKA_WAIT_PID=""       # the broker kafka_launch started (or found unchecked); empty: nothing to wait for
KAFKA_LOG_OFFSET=-1     # where this start's part of server.log begins; -1: it had started before

# Make sure a broker with the current configuration runs; does not wait for it (kafka_wait).
kafka_launch() {
  local pid new="$KAFKA_PROPS.new"
  KAFKA_WAIT_PID=""
  KAFKA_LOG_OFFSET=-1
  ensure_java
  ensure_kafka_libs
  write_kafka_config "$new"
  if pid="$(running_pid "$KAFKA_PID" kafka.Kafka)"; then
    if cmp -s "$new" "$KAFKA_PROPS"; then
      rm -f "$new"
      if [[ "$(cat "$KAFKA_READY" 2>/dev/null || true)" == "$pid" ]]; then
        log "Kafka already running (pid $pid) on $HOST:$KAFKA_PORT"
      else
        log "Kafka already running (pid $pid), not yet checked: waiting for a SASL login"
        KAFKA_WAIT_PID="$pid"
      fi
      return 0
    fi
    log "Kafka (pid $pid) runs with another configuration (an older ops/stack.sh, other ports or password): restarting it"
    stop_kafka
  fi
  local p
  for p in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT" "$KAFKA_SASL_PORT" "$KAFKA_SASL_SSL_PORT"; do
    port_open "$p" && die "port $HOST:$p is already in use by another process (not our Kafka); stop it or set NEARDUP_KAFKA_PORT / NEARDUP_KAFKA_CONTROLLER_PORT / NEARDUP_KAFKA_SASL_PORT / NEARDUP_KAFKA_SASL_SSL_PORT"
  done
  mv "$new" "$KAFKA_PROPS"
  rm -f "$KAFKA_READY"
  format_kafka_storage

  local server_log="$KAFKA_LOGS/server.log" out="$KAFKA_LOGS/kafka.out" offset=0
  [[ -f "$server_log" ]] && offset="$(stat -c %s "$server_log")"
  printf '\n===== %s ops/stack.sh starting Kafka =====\n' "$(date -u +%FT%TZ)" >>"$out"

  log "starting Kafka on $HOST:$KAFKA_PORT (SASL_PLAINTEXT $KAFKA_SASL_PORT, SASL_SSL $KAFKA_SASL_SSL_PORT, controller $KAFKA_CONTROLLER_PORT, state $KAFKA_STATE)"
  # own session (setsid) so it outlives the caller's terminal / process group; no inherited
  # stdio (a caller reading our output would otherwise wait for the broker) and no lock fd
  # shellcheck disable=SC2086
  setsid java $KAFKA_HEAP_OPTS $KAFKA_JVM_OPTS \
    -Dlog4j2.configurationFile="$OPS_DIR/kafka/log4j2.xml" \
    -Dkafka.logs.dir="$KAFKA_LOGS" \
    -cp "$KAFKA_LIB/*" kafka.Kafka "$KAFKA_PROPS" \
    </dev/null >>"$out" 2>&1 9>&- &
  pid=$!
  printf '%s\n' "$pid" >"$KAFKA_PID"
  KAFKA_WAIT_PID="$pid"
  KAFKA_LOG_OFFSET="$offset"
}

# Wait until the broker kafka_launch started serves a SCRAM login over SASL_SSL. If the login
# fails (storage formatted without the SCRAM user, or with another password), write the user's
# SCRAM credentials once through the PLAINTEXT listener and try again.
kafka_wait() {
  local pid="$KAFKA_WAIT_PID" offset="$KAFKA_LOG_OFFSET"
  [[ -n "$pid" ]] || return 0
  local server_log="$KAFKA_LOGS/server.log" out="$KAFKA_LOGS/kafka.out"
  local deadline=$((SECONDS + KAFKA_START_TIMEOUT)) started=0 scram_tried=0 scram_written=0 scram_failed=0 size
  (( offset < 0 )) && started=1
  write_kafka_client_config
  while :; do
    if ! alive "$pid"; then
      show_tail "$out" 40
      show_tail "$server_log" 60
      rm -f "$KAFKA_PID"
      die "Kafka exited while starting (logs in $KAFKA_LOGS)"
    fi
    if [[ "$started" -eq 0 ]] && port_open "$KAFKA_PORT"; then
      # the broker logs this once it serves requests; only look at this start's part of the log
      size="$(stat -c %s "$server_log" 2>/dev/null || echo 0)"
      (( size < offset )) && offset=0   # log was rolled over
      if tail -c "+$((offset + 1))" "$server_log" 2>/dev/null |
          grep -E 'Kafka Server started|started \(kafka\.server\.KafkaRaftServer\)' >/dev/null; then
        started=1
      fi
    fi
    if [[ "$started" -eq 1 ]]; then
      if kafka_login_ok; then
        break
      fi
      if [[ "$scram_written" -eq 0 ]]; then
        # storage formatted without the user (an older ops/stack.sh) or with another password
        if [[ "$scram_tried" -eq 0 ]]; then
          log "no SCRAM login as '$KAFKA_USER' yet: writing the user's SCRAM credentials"
          scram_tried=1
        fi
        if kafka_set_scram; then
          scram_written=1
        elif (( ++scram_failed >= 3 )); then
          show_tail "$KAFKA_LOGS/scram-credentials.log" 30
          die "could not write the SCRAM credentials of '$KAFKA_USER' (Kafka pid $pid still running; logs in $KAFKA_LOGS)"
        fi
      fi
    fi
    if (( SECONDS >= deadline )); then
      show_tail "$out" 40
      show_tail "$server_log" 60
      show_tail "$KAFKA_LOGS/scram-credentials.log" 20
      show_tail "$KAFKA_LOGS/readiness-check.log" 20
      die "Kafka did not accept a SCRAM login over SASL_SSL on $HOST:$KAFKA_SASL_SSL_PORT within ${KAFKA_START_TIMEOUT}s (pid $pid still running; logs in $KAFKA_LOGS)"
    fi
    sleep 0.5
  done
  printf '%s\n' "$pid" >"$KAFKA_READY"
  log "Kafka is up (pid $pid) on $HOST:$KAFKA_PORT, SASL on $KAFKA_SASL_PORT and $KAFKA_SASL_SSL_PORT (user '$KAFKA_USER')"
}

start_kafka() {
  kafka_launch
  kafka_wait
}

stop_kafka() {
  stop_pidfile Kafka "$KAFKA_PID" kafka.Kafka
  rm -f "$KAFKA_READY"
}

# ---------------------------------------------------------------- Redis

# true once Redis on port $1 answers PONG (while it loads its AOF it answers LOADING: not ready)
redis_ping() {
  [[ "$(redis-cli -h "$HOST" -p "${1:-$REDIS_PORT}" ping 2>/dev/null)" == PONG ]]
}

REDIS_LAUNCH_PID=""   # pid redis_daemon launched; empty if it left a running server alone

# redis_daemon NAME PORTS PIDFILE LOGFILE STAMP ARGS...: make sure a redis-server runs with ARGS.
# One that runs with the same ARGS and STAMP (kept in a file beside PIDFILE) is left alone;
# one with others is stopped; then a new one is started, in its own session, writing its pid
# to PIDFILE (wait for it with wait_redis). PORTS: the ports it will listen on (space-separated).
redis_daemon() {
  local name="$1" ports="$2" pidfile="$3" logfile="$4" stamp="$5"
  shift 5
  local stampfile="${pidfile%.pid}.stamp" out="${pidfile%.pid}.out" pid p
  stamp="$({ printf '%s\n' "$@"; printf '%s\n' "$stamp"; } | sha256_of)"
  REDIS_LAUNCH_PID=""
  if pid="$(running_pid "$pidfile" redis-server)"; then
    if [[ "$(cat "$stampfile" 2>/dev/null || true)" == "$stamp" ]]; then
      log "$name already running (pid $pid) on $HOST:${ports// /,}"
      return 0
    fi
    log "$name (pid $pid) runs with another configuration (an older ops/stack.sh, or other settings): restarting it"
    stop_pidfile "$name" "$pidfile" redis-server
  fi
  for p in $ports; do
    port_open "$p" && die "port $HOST:$p is already in use by another process (not our $name; maybe the system's redis-server service: 'service redis-server stop'); stop it or choose other ports (NEARDUP_REDIS_PORT, NEARDUP_REDIS_TLS_PORT, NEARDUP_REDIS_CLUSTER_PORT, NEARDUP_REDIS_CLUSTER_BUS_PORT)"
  done
  rm -f "$pidfile" "$stampfile"
  log "starting $name on $HOST:${ports// /,}"
  printf '\n===== %s ops/stack.sh starting %s =====\n' "$(date -u +%FT%TZ)" "$name" >>"$out"
  # not --daemonize: started like Kafka, so that a server that dies while starting is noticed
  # at once; it writes PIDFILE itself (--pidfile)
  setsid redis-server "$@" --daemonize no --pidfile "$pidfile" --logfile "$logfile" \
    </dev/null >>"$out" 2>&1 9>&- &
  REDIS_LAUNCH_PID=$!
  printf '%s\n' "$stamp" >"$stampfile"
}

# wait_redis NAME PORT PIDFILE LOGFILE LAUNCH_PID: until it answers PONG (its AOF is loaded)
wait_redis() {
  local name="$1" port="$2" pidfile="$3" logfile="$4" launched="$5" pid i
  local out="${pidfile%.pid}.out" deadline=$((SECONDS + REDIS_START_TIMEOUT))
  while ! redis_ping "$port"; do
    if ! alive "$launched" && ! running_pid "$pidfile" redis-server >/dev/null; then
      show_tail "$out" 20
      show_tail "$logfile" 40
      rm -f "$pidfile" "${pidfile%.pid}.stamp"
      die "$name exited while starting (log: $logfile)"
    fi
    if (( SECONDS >= deadline )); then
      show_tail "$out" 20
      show_tail "$logfile" 40
      die "$name did not answer PING on $HOST:$port within ${REDIS_START_TIMEOUT}s (still loading its AOF? NEARDUP_REDIS_START_TIMEOUT)"
    fi
    sleep 0.1
  done
  for ((i = 0; i < 50; i++)); do
    [[ -s "$pidfile" ]] && break
    sleep 0.1
  done
  pid="$(running_pid "$pidfile" redis-server)" || die "$name answers but its pid file $pidfile is missing"
  log "$name is up (pid $pid) on $HOST:$port"
}

# the users of the main server: `default` as before (no password, everything) and the ACL user
# with what the index needs (the password only as its SHA-256)
write_redis_acl() {
  local hash
  hash="$(printf '%s' "$REDIS_PASSWORD" | sha256_of)"
  (umask 077 && cat >"$REDIS_ACL.tmp") <<EOF || die "cannot write $REDIS_ACL"
user default on nopass ~* &* +@all
user $REDIS_USER on #$hash resetchannels ~nd:* -@all +@read +@write +@keyspace +@scripting +@transaction +@connection -@dangerous +ping +info +memory +scan +time +select
EOF
  mv "$REDIS_ACL.tmp" "$REDIS_ACL"
}

start_redis() {
  ensure_redis
  mkdir -p "$REDIS_STATE"
  write_redis_acl
  local args=(
    --bind "$HOST" --port "$REDIS_PORT" --protected-mode yes --supervised no
    --tls-port "$REDIS_TLS_PORT" --tls-cert-file "$SERVER_CERT" --tls-key-file "$SERVER_KEY"
    --tls-ca-cert-file "$CA_CERT" --tls-auth-clients yes
    --aclfile "$REDIS_ACL"
    --dir "$REDIS_STATE" --save ""
    --appendonly yes --appendfsync everysec --aof-use-rdb-preamble yes
  )
  local extra=()
  if [[ -n "${NEARDUP_REDIS_ARGS:-}" ]]; then
    # shell-quoted words, e.g. --save "60 1" --maxmemory 64mb
    eval "extra=(${NEARDUP_REDIS_ARGS})"
  fi
  # later arguments win, so NEARDUP_REDIS_ARGS can override any of ours
  redis_daemon Redis "$REDIS_PORT $REDIS_TLS_PORT" "$REDIS_PID" "$REDIS_LOG" "tls $(tls_digest)" \
    "${args[@]}" "${extra[@]}"
  if [[ -n "$REDIS_LAUNCH_PID" ]]; then
    wait_redis Redis "$REDIS_PORT" "$REDIS_PID" "$REDIS_LOG" "$REDIS_LAUNCH_PID"
  else
    # it runs with the same arguments: only the users may have changed
    local reply
    reply="$(redis-cli -h "$HOST" -p "$REDIS_PORT" ACL LOAD 2>&1 || true)"
    [[ "$reply" == OK ]] || die "Redis (port $REDIS_PORT) did not reload its users from $REDIS_ACL: $reply"
  fi
}

stop_redis() {
  stop_pidfile Redis "$REDIS_PID" redis-server
}

# ---------------------------------------------------------------- Redis Cluster

cluster_ports() {
  local i
  for ((i = 0; i < CLUSTER_SIZE; i++)); do printf '%s\n' $((CLUSTER_PORT + i)); done
}

cluster_bus_port() {
  if [[ -n "$CLUSTER_BUS_PORT" ]]; then
    printf '%s\n' $((CLUSTER_BUS_PORT + $1 - CLUSTER_PORT))
  else
    printf '%s\n' $(($1 + 10000))
  fi
}

# the value of FIELD in CLUSTER INFO of the node on PORT (empty if it does not answer)
cluster_field() {
  redis-cli -h "$HOST" -p "$1" cluster info 2>/dev/null | tr -d '\r' | sed -n "s/^$2://p"
}

start_cluster() {
  ensure_redis
  local port bus dir launched=()
  for port in $(cluster_ports); do
    bus="$(cluster_bus_port "$port")"
    dir="$CLUSTER_STATE/$port"
    mkdir -p "$dir"
    redis_daemon "Redis Cluster node $port" "$port $bus" "$dir/redis.pid" "$dir/redis.log" "" \
      --bind "$HOST" --port "$port" --protected-mode yes --supervised no \
      --cluster-enabled yes --cluster-config-file "$dir/nodes.conf" --cluster-port "$bus" \
      --dir "$dir" --save "" --appendonly yes --appendfsync everysec --aof-use-rdb-preamble yes
    [[ -n "$REDIS_LAUNCH_PID" ]] && launched+=("$port:$REDIS_LAUNCH_PID")
  done
  local entry
  for entry in ${launched[@]+"${launched[@]}"}; do
    port="${entry%%:*}"
    dir="$CLUSTER_STATE/$port"
    wait_redis "Redis Cluster node $port" "$port" "$dir/redis.pid" "$dir/redis.log" "${entry#*:}"
  done
  form_cluster
}

# create the cluster if every node is new (knows only itself, no slots); then wait until every
# node reports cluster_state:ok
form_cluster() {
  local port known assigned fresh=0 joined=0 nodes=() out="$CLUSTER_STATE/create.log"
  for port in $(cluster_ports); do
    nodes+=("$HOST:$port")
    known="$(cluster_field "$port" cluster_known_nodes)"
    assigned="$(cluster_field "$port" cluster_slots_assigned)"
    if [[ "$known" == 1 && "$assigned" == 0 ]]; then
      fresh=$((fresh + 1))
    else
      joined=$((joined + 1))
    fi
  done
  if (( joined == 0 )); then
    log "creating the Redis Cluster of ${nodes[*]} (log: $out)"
    if ! redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes \
        >"$out" 2>&1 </dev/null; then
      show_tail "$out" 30
      die "redis-cli --cluster create failed"
    fi
  elif (( fresh > 0 )); then
    die "the Redis Cluster in $CLUSTER_STATE is half made ($fresh of ${#nodes[@]} nodes are new): run 'ops/stack.sh down', remove $CLUSTER_STATE (its data) and run up again"
  fi
  local deadline=$((SECONDS + REDIS_START_TIMEOUT)) ok state
  while :; do
    ok=1
    for port in $(cluster_ports); do
      state="$(cluster_field "$port" cluster_state)"
      [[ "$state" == ok ]] || { ok=0; break; }
    done
    (( ok )) && break
    if (( SECONDS >= deadline )); then
      show_tail "$out" 20
      show_tail "$CLUSTER_STATE/$port/redis.log" 30
      die "the Redis Cluster node on $HOST:$port says cluster_state:${state:-?} after ${REDIS_START_TIMEOUT}s (to start afresh: ops/stack.sh down; rm -rf $CLUSTER_STATE)"
    fi
    sleep 0.2
  done
  log "Redis Cluster is up: ${nodes[*]} (cluster_state:ok)"
}

# stop every node that has a directory in the state dir (whatever the ports are now)
stop_cluster() {
  local pidfile
  for pidfile in "$CLUSTER_STATE"/*/redis.pid; do
    [[ -e "$pidfile" ]] || continue
    stop_pidfile "Redis Cluster node $(basename "$(dirname "$pidfile")")" "$pidfile" redis-server
  done
}

# ---------------------------------------------------------------- commands

# dies on malformed or clashing settings
check_config() {
  [[ "$CLUSTER_ENABLED" == 0 || "$CLUSTER_ENABLED" == 1 ]] ||
    die "NEARDUP_STACK_CLUSTER must be 0 or 1, not '$CLUSTER_ENABLED'"
  local specs=(
    "NEARDUP_KAFKA_PORT=$KAFKA_PORT"
    "NEARDUP_KAFKA_CONTROLLER_PORT=$KAFKA_CONTROLLER_PORT"
    "NEARDUP_KAFKA_SASL_PORT=$KAFKA_SASL_PORT"
    "NEARDUP_KAFKA_SASL_SSL_PORT=$KAFKA_SASL_SSL_PORT"
    "NEARDUP_REDIS_PORT=$REDIS_PORT"
    "NEARDUP_REDIS_TLS_PORT=$REDIS_TLS_PORT"
  )
  if [[ "$CLUSTER_ENABLED" == 1 ]]; then
    is_port "$CLUSTER_PORT" || die "bad NEARDUP_REDIS_CLUSTER_PORT: '$CLUSTER_PORT'"
    [[ -z "$CLUSTER_BUS_PORT" ]] || is_port "$CLUSTER_BUS_PORT" ||
      die "bad NEARDUP_REDIS_CLUSTER_BUS_PORT: '$CLUSTER_BUS_PORT'"
    local port
    for port in $(cluster_ports); do
      specs+=("NEARDUP_REDIS_CLUSTER_PORT(+$((port - CLUSTER_PORT)))=$port")
      specs+=("cluster bus port of $port=$(cluster_bus_port "$port")")
    done
  fi
  check_ports "${specs[@]}"
}

# the credentials and certificates up made; dies if there are none yet
need_state() {
  local f missing=()
  for f in "$SECRETS_DIR"/{redis-user,redis-password,kafka-user,kafka-password} \
      "$CA_CERT" "$CLIENT_CERT" "$CLIENT_KEY"; do
    [[ -s "$f" ]] || missing+=("$f")
  done
  (( ${#missing[@]} == 0 )) ||
    die "no credentials or certificates in $STATE_DIR yet (no ${missing[0]}): run 'ops/stack.sh up' first, with the same NEARDUP_STACK_DIR"
}

cmd_status() {
  local rc=0 pid port p closed
  if pid="$(running_pid "$KAFKA_PID" kafka.Kafka)"; then
    closed=""
    for p in "$KAFKA_PORT" "$KAFKA_SASL_PORT" "$KAFKA_SASL_SSL_PORT"; do
      port_open "$p" || closed+=" $p"
    done
    if [[ -z "$closed" ]]; then
      echo "kafka: running (pid $pid) on $HOST:$KAFKA_PORT, SASL_PLAINTEXT $KAFKA_SASL_PORT, SASL_SSL $KAFKA_SASL_SSL_PORT"
    else
      echo "kafka: running (pid $pid) but not accepting connections on port(s)$closed"
      rc=1
    fi
  else
    echo "kafka: stopped"
    rc=1
  fi
  if pid="$(running_pid "$REDIS_PID" redis-server)"; then
    if command -v redis-cli >/dev/null 2>&1 && redis_ping; then
      if port_open "$REDIS_TLS_PORT"; then
        echo "redis: running (pid $pid) on $HOST:$REDIS_PORT, TLS $REDIS_TLS_PORT"
      else
        echo "redis: running (pid $pid) on $HOST:$REDIS_PORT but its TLS port $REDIS_TLS_PORT is closed"
        rc=1
      fi
    else
      echo "redis: running (pid $pid) but does not answer PING on $HOST:$REDIS_PORT"
      rc=1
    fi
  else
    echo "redis: stopped"
    rc=1
  fi
  if [[ "$CLUSTER_ENABLED" == 1 ]]; then
    for port in $(cluster_ports); do
      if pid="$(running_pid "$CLUSTER_STATE/$port/redis.pid" redis-server)"; then
        local state
        state="$(cluster_field "$port" cluster_state)"
        echo "redis-cluster: node running (pid $pid) on $HOST:$port, cluster_state:${state:-?}"
        [[ "$state" == ok ]] || rc=1
      else
        echo "redis-cluster: node on $HOST:$port stopped"
        rc=1
      fi
    done
  fi
  echo "state: $STATE_DIR"
  return "$rc"
}

export_line() {
  printf 'export %s=%s\n' "$1" "$(shell_quote "$2")"
}

cmd_env() {
  need_state
  export_line NEARDUP_BOOTSTRAP_SERVERS "$HOST:$KAFKA_PORT"
  export_line NEARDUP_REDIS_URL "redis://$HOST:$REDIS_PORT/0"
  export_line NEARDUP_STACK_REDIS_USER "$(cat "$SECRETS_DIR/redis-user")"
  export_line NEARDUP_STACK_REDIS_PASSWORD "$(cat "$SECRETS_DIR/redis-password")"
  export_line NEARDUP_STACK_REDIS_TLS_URL "rediss://$HOST:$REDIS_TLS_PORT/0"
  export_line NEARDUP_STACK_CA_FILE "$CA_CERT"
  export_line NEARDUP_STACK_CLIENT_CERT "$CLIENT_CERT"
  export_line NEARDUP_STACK_CLIENT_KEY "$CLIENT_KEY"
  export_line NEARDUP_STACK_KAFKA_SASL "$HOST:$KAFKA_SASL_PORT"
  export_line NEARDUP_STACK_KAFKA_SASL_SSL "$HOST:$KAFKA_SASL_SSL_PORT"
  export_line NEARDUP_STACK_KAFKA_USER "$(cat "$SECRETS_DIR/kafka-user")"
  export_line NEARDUP_STACK_KAFKA_PASSWORD "$(cat "$SECRETS_DIR/kafka-password")"
  if [[ "$CLUSTER_ENABLED" == 1 ]]; then
    export_line NEARDUP_STACK_REDIS_CLUSTER_URL "redis://$HOST:$CLUSTER_PORT/0"
  fi
}

usage() {
  sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
}

# what every start needs first: sane settings, the certificates and the passwords
prepare() {
  check_config
  ensure_tls
  load_credentials
}

main() {
  local cmd="${1:-}"
  case "$cmd" in
    up)
      take_lock
      local t0=$SECONDS
      prepare
      kafka_launch   # the broker boots while the Redis servers start
      start_redis
      if [[ "$CLUSTER_ENABLED" == 1 ]]; then start_cluster; fi
      kafka_wait
      log "stack is up in $((SECONDS - t0))s; state in $STATE_DIR"
      ;;
    down)
      take_lock
      stop_kafka
      stop_redis
      stop_cluster
      ;;
    status)
      cmd_status
      ;;
    restart-kafka)
      take_lock
      prepare
      stop_kafka
      start_kafka
      ;;
    restart-redis)
      take_lock
      prepare
      stop_redis
      start_redis
      ;;
    restart-redis-cluster)
      take_lock
      [[ "$CLUSTER_ENABLED" == 1 ]] || die "the Redis Cluster is off (NEARDUP_STACK_CLUSTER=0)"
      check_config
      stop_cluster
      start_cluster
      ;;
    env)
      cmd_env
      ;;
    install)
      take_lock
      ensure_redis
      ensure_openssl
      ensure_java
      ensure_kafka_libs
      log "installed: $(command -v redis-server), $(command -v openssl), Kafka jars in $KAFKA_LIB"
      ;;
    -h | --help | help)
      usage
      ;;
    *)
      usage
      exit 2
      ;;
  esac
}

main "$@"
