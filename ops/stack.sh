#!/usr/bin/env bash
# Local Kafka + Redis stack for neardup's tests and development, without Docker.
#
#   ops/stack.sh up              install what is missing, start Kafka and Redis, wait until both answer
#   ops/stack.sh down            stop both (safe when nothing runs)
#   ops/stack.sh status          show what runs (exit 0 only if both run)
#   ops/stack.sh restart-kafka   stop and start Kafka, keeping its data
#   ops/stack.sh restart-redis   stop and start Redis (its data survives only with persistence, see below)
#   ops/stack.sh env             print `export NEARDUP_...=` lines for the chosen ports
#   ops/stack.sh install         only install / fetch what is missing (Redis, Kafka jars)
#
# Kafka: Apache Kafka 4.x, one KRaft node (broker + controller in one process). Its jars come
# from Maven (ops/kafka/pom.xml) and are cached under ops/.cache/; it runs as
#   java -cp '<jars>/*' kafka.Kafka server.properties
# Redis: Debian's redis-server package, run as our own daemon (not the system service).
#
# Environment (all optional):
#   NEARDUP_STACK_DIR                 runtime state: data, logs, pid files   (/tmp/neardup-stack)
#   NEARDUP_STACK_CACHE               where the Kafka jars are kept          (ops/.cache)
#   NEARDUP_KAFKA_PORT                broker listener on 127.0.0.1           (9092)
#   NEARDUP_KAFKA_CONTROLLER_PORT     KRaft controller listener              (9093)
#   NEARDUP_KAFKA_HEAP_OPTS           broker heap                            (-Xms256m -Xmx512m)
#   NEARDUP_KAFKA_JVM_OPTS            other broker JVM flags                 (see below)
#   NEARDUP_KAFKA_EXTRA_CONFIG        extra server.properties lines, appended last (they win)
#   NEARDUP_KAFKA_CLUSTER_ID          cluster id used when formatting fresh storage (random)
#   NEARDUP_KAFKA_START_TIMEOUT       seconds to wait for the broker         (120)
#   NEARDUP_REDIS_PORT                Redis port on 127.0.0.1                (6379)
#   NEARDUP_REDIS_ARGS                extra redis-server arguments, shell-quoted, after ours, e.g.
#                                     NEARDUP_REDIS_ARGS='--appendonly yes' (persistence, so data
#                                     survives restart-redis) or '--maxmemory 64mb'
#   NEARDUP_REDIS_START_TIMEOUT       seconds to wait for Redis              (30)
#   NEARDUP_STOP_TIMEOUT              seconds between SIGTERM and SIGKILL    (30)
# Every subcommand reads these from the environment at the time it runs, so use the same
# values for `up`, `restart-*`, `env` and `status`. Progress goes to stderr.
set -euo pipefail

OPS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
HOST=127.0.0.1

STATE_DIR="${NEARDUP_STACK_DIR:-/tmp/neardup-stack}"
CACHE_DIR="${NEARDUP_STACK_CACHE:-$OPS_DIR/.cache}"

KAFKA_PORT="${NEARDUP_KAFKA_PORT:-9092}"
KAFKA_CONTROLLER_PORT="${NEARDUP_KAFKA_CONTROLLER_PORT:-9093}"
KAFKA_HEAP_OPTS="${NEARDUP_KAFKA_HEAP_OPTS:--Xms256m -Xmx512m}"
# Serial GC and a small thread stack suit a 512m broker on 2 cores; CDS is on by default.
KAFKA_JVM_OPTS="${NEARDUP_KAFKA_JVM_OPTS:--XX:+UseSerialGC -Xss512k -XX:+ExitOnOutOfMemoryError -XX:-UsePerfData -Djava.awt.headless=true -Djava.net.preferIPv4Stack=true}"
KAFKA_START_TIMEOUT="${NEARDUP_KAFKA_START_TIMEOUT:-120}"

REDIS_PORT="${NEARDUP_REDIS_PORT:-6379}"
REDIS_START_TIMEOUT="${NEARDUP_REDIS_START_TIMEOUT:-30}"

STOP_TIMEOUT="${NEARDUP_STOP_TIMEOUT:-30}"

KAFKA_POM="$OPS_DIR/kafka/pom.xml"
KAFKA_STATE="$STATE_DIR/kafka"
KAFKA_DATA="$KAFKA_STATE/data"
KAFKA_LOGS="$KAFKA_STATE/logs"
KAFKA_PROPS="$KAFKA_STATE/server.properties"
KAFKA_PID="$KAFKA_STATE/kafka.pid"
REDIS_STATE="$STATE_DIR/redis"
REDIS_PID="$REDIS_STATE/redis.pid"
REDIS_LOG="$REDIS_STATE/redis.log"

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

# true if something accepts TCP connections on 127.0.0.1:$1 (bash's /dev/tcp, no nc needed)
port_open() {
  local port="$1"
  if command -v timeout >/dev/null 2>&1; then
    timeout 2 bash -c "exec 3<>/dev/tcp/$HOST/$port" 2>/dev/null
  else
    (exec 3<>"/dev/tcp/$HOST/$port") 2>/dev/null
  fi
}

# prints the pid in pidfile $1 if that process is alive and its command line contains $2
running_pid() {
  local pidfile="$1" marker="$2" pid
  [[ -f "$pidfile" ]] || return 1
  pid="$(tr -dc '0-9' <"$pidfile" 2>/dev/null || true)"
  [[ -n "$pid" ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
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
  for ((i = 0; i < STOP_TIMEOUT * 5; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name did not stop within ${STOP_TIMEOUT}s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    kill -0 "$pid" 2>/dev/null && die "could not kill $name (pid $pid)"
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

write_kafka_config() {
  mkdir -p "$KAFKA_DATA" "$KAFKA_LOGS"
  cat >"$KAFKA_PROPS" <<EOF
# generated by ops/stack.sh on each start; edit the script (or NEARDUP_KAFKA_EXTRA_CONFIG) instead
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$HOST:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://$HOST:$KAFKA_PORT,CONTROLLER://$HOST:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$HOST:$KAFKA_PORT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$KAFKA_DATA

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
    printf '\n# NEARDUP_KAFKA_EXTRA_CONFIG\n%s\n' "$NEARDUP_KAFKA_EXTRA_CONFIG" >>"$KAFKA_PROPS"
  fi
}

format_kafka_storage() {
  if [[ -f "$KAFKA_DATA/meta.properties" ]]; then
    return 0
  fi
  local cid="${NEARDUP_KAFKA_CLUSTER_ID:-}"
  if [[ -z "$cid" && -s "$KAFKA_STATE/cluster.id" ]]; then cid="$(cat "$KAFKA_STATE/cluster.id")"; fi
  [[ -n "$cid" ]] || cid="$(new_cluster_id)"
  printf '%s\n' "$cid" >"$KAFKA_STATE/cluster.id"
  log "formatting Kafka storage in $KAFKA_DATA (cluster id $cid)"
  local out="$KAFKA_LOGS/storage-format.log"
  if ! kafka_java kafka.tools.StorageTool format --ignore-formatted -t "$cid" -c "$KAFKA_PROPS" \
      >"$out" 2>&1 </dev/null; then
    show_tail "$out" 40
    die "formatting Kafka storage failed"
  fi
}

kafka_metadata_ok() {
  # asks the broker for its topics (a metadata request through the admin client)
  timeout 45 java -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData \
    -Dlog4j2.configurationFile="$OPS_DIR/kafka/log4j2-tools.xml" \
    -cp "$KAFKA_LIB/*" org.apache.kafka.tools.TopicCommand \
    --bootstrap-server "$HOST:$KAFKA_PORT" --list >"$KAFKA_LOGS/readiness-check.log" 2>&1 </dev/null
}

start_kafka() {
  local pid
  if pid="$(running_pid "$KAFKA_PID" kafka.Kafka)"; then
    log "Kafka already running (pid $pid) on $HOST:$KAFKA_PORT"
    return 0
  fi
  is_port "$KAFKA_PORT" || die "bad NEARDUP_KAFKA_PORT: $KAFKA_PORT"
  is_port "$KAFKA_CONTROLLER_PORT" || die "bad NEARDUP_KAFKA_CONTROLLER_PORT: $KAFKA_CONTROLLER_PORT"
  [[ "$KAFKA_PORT" != "$KAFKA_CONTROLLER_PORT" ]] || die "Kafka broker and controller ports must differ"
  local p
  for p in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"; do
    port_open "$p" && die "port $HOST:$p is already in use by another process (not our Kafka); stop it or set NEARDUP_KAFKA_PORT / NEARDUP_KAFKA_CONTROLLER_PORT"
  done
  ensure_java
  ensure_kafka_libs
  write_kafka_config
  format_kafka_storage

  local server_log="$KAFKA_LOGS/server.log" out="$KAFKA_LOGS/kafka.out" offset=0
  [[ -f "$server_log" ]] && offset="$(stat -c %s "$server_log")"
  printf '\n===== %s ops/stack.sh starting Kafka =====\n' "$(date -u +%FT%TZ)" >>"$out"

  log "starting Kafka on $HOST:$KAFKA_PORT (controller $HOST:$KAFKA_CONTROLLER_PORT, state $KAFKA_STATE)"
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

  local deadline=$((SECONDS + KAFKA_START_TIMEOUT)) started=0
  while :; do
    if ! kill -0 "$pid" 2>/dev/null; then
      show_tail "$out" 40
      show_tail "$server_log" 60
      rm -f "$KAFKA_PID"
      die "Kafka exited while starting (logs in $KAFKA_LOGS)"
    fi
    if [[ "$started" -eq 0 ]] && port_open "$KAFKA_PORT"; then
      # the broker logs this once it serves requests; only look at this start's part of the log
      local size
      size="$(stat -c %s "$server_log" 2>/dev/null || echo 0)"
      (( size < offset )) && offset=0   # log was rolled over
      if tail -c "+$((offset + 1))" "$server_log" 2>/dev/null |
          grep -E 'Kafka Server started|started \(kafka\.server\.KafkaRaftServer\)' >/dev/null; then
        started=1
      fi
    fi
    if [[ "$started" -eq 1 ]] && kafka_metadata_ok; then
      break
    fi
    if (( SECONDS >= deadline )); then
      show_tail "$out" 40
      show_tail "$server_log" 60
      show_tail "$KAFKA_LOGS/readiness-check.log" 20
      die "Kafka did not answer on $HOST:$KAFKA_PORT within ${KAFKA_START_TIMEOUT}s (pid $pid still running; logs in $KAFKA_LOGS)"
    fi
    sleep 0.5
  done
  log "Kafka is up (pid $pid) on $HOST:$KAFKA_PORT"
}

stop_kafka() {
  stop_pidfile Kafka "$KAFKA_PID" kafka.Kafka
}

# ---------------------------------------------------------------- Redis

redis_ping() {
  [[ "$(redis-cli -h "$HOST" -p "$REDIS_PORT" ping 2>/dev/null)" == PONG ]]
}

start_redis() {
  local pid
  if pid="$(running_pid "$REDIS_PID" redis-server)"; then
    log "Redis already running (pid $pid) on $HOST:$REDIS_PORT"
    return 0
  fi
  is_port "$REDIS_PORT" || die "bad NEARDUP_REDIS_PORT: $REDIS_PORT"
  ensure_redis
  port_open "$REDIS_PORT" && die "port $HOST:$REDIS_PORT is already in use by another process (not our Redis; maybe the system's redis-server service: 'service redis-server stop'); stop it or set NEARDUP_REDIS_PORT"
  mkdir -p "$REDIS_STATE"
  rm -f "$REDIS_PID"

  local extra=()
  if [[ -n "${NEARDUP_REDIS_ARGS:-}" ]]; then
    # shell-quoted words, e.g. --save "60 1" --appendonly yes
    eval "extra=(${NEARDUP_REDIS_ARGS})"
  fi
  local out="$REDIS_STATE/redis.out"
  log "starting Redis on $HOST:$REDIS_PORT (state $REDIS_STATE)"
  # later arguments win, so NEARDUP_REDIS_ARGS can override any of ours
  if ! redis-server --bind "$HOST" --port "$REDIS_PORT" \
      --daemonize yes --pidfile "$REDIS_PID" --logfile "$REDIS_LOG" --dir "$REDIS_STATE" \
      --save "" --appendonly no --protected-mode yes --supervised no \
      "${extra[@]}" </dev/null >"$out" 2>&1 9>&-; then
    show_tail "$out" 20
    show_tail "$REDIS_LOG" 40
    die "redis-server failed to start"
  fi

  local deadline=$((SECONDS + REDIS_START_TIMEOUT))
  while :; do
    if redis_ping; then
      break
    fi
    if (( SECONDS >= deadline )); then
      show_tail "$out" 20
      show_tail "$REDIS_LOG" 40
      die "Redis did not answer PING on $HOST:$REDIS_PORT within ${REDIS_START_TIMEOUT}s"
    fi
    sleep 0.2
  done
  # the daemon writes its pid file itself; wait for it briefly
  local i
  for ((i = 0; i < 50; i++)); do
    [[ -s "$REDIS_PID" ]] && break
    sleep 0.1
  done
  pid="$(running_pid "$REDIS_PID" redis-server)" || die "Redis answers but its pid file $REDIS_PID is missing"
  log "Redis is up (pid $pid) on $HOST:$REDIS_PORT"
}

stop_redis() {
  stop_pidfile Redis "$REDIS_PID" redis-server
}

# ---------------------------------------------------------------- commands

cmd_status() {
  local rc=0 pid
  if pid="$(running_pid "$KAFKA_PID" kafka.Kafka)"; then
    if port_open "$KAFKA_PORT"; then
      echo "kafka: running (pid $pid) on $HOST:$KAFKA_PORT"
    else
      echo "kafka: running (pid $pid) but $HOST:$KAFKA_PORT does not accept connections"
      rc=1
    fi
  else
    echo "kafka: stopped"
    rc=1
  fi
  if pid="$(running_pid "$REDIS_PID" redis-server)"; then
    if command -v redis-cli >/dev/null 2>&1 && redis_ping; then
      echo "redis: running (pid $pid) on $HOST:$REDIS_PORT"
    else
      echo "redis: running (pid $pid) but does not answer PING on $HOST:$REDIS_PORT"
      rc=1
    fi
  else
    echo "redis: stopped"
    rc=1
  fi
  echo "state: $STATE_DIR"
  return "$rc"
}

cmd_env() {
  echo "export NEARDUP_BOOTSTRAP_SERVERS=$HOST:$KAFKA_PORT"
  echo "export NEARDUP_REDIS_URL=redis://$HOST:$REDIS_PORT/0"
}

usage() {
  sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
}

main() {
  local cmd="${1:-}"
  case "$cmd" in
    up)
      take_lock
      local t0=$SECONDS
      start_redis
      start_kafka
      log "stack is up in $((SECONDS - t0))s; state in $STATE_DIR"
      ;;
    down)
      take_lock
      stop_kafka
      stop_redis
      ;;
    status)
      cmd_status
      ;;
    restart-kafka)
      take_lock
      stop_kafka
      start_kafka
      ;;
    restart-redis)
      take_lock
      stop_redis
      start_redis
      ;;
    env)
      cmd_env
      ;;
    install)
      take_lock
      ensure_redis
      ensure_java
      ensure_kafka_libs
      log "installed: $(command -v redis-server), Kafka jars in $KAFKA_LIB"
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
