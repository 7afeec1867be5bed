#!/bin/bash
# The Kafka image's entrypoint (ops/kafka/Dockerfile):
#   start        write server.properties, format the storage if it is new, run the broker
#   healthcheck  exit 0 if the broker answers an ApiVersions request without error
# Environment: KAFKA_PORT, KAFKA_CONTROLLER_PORT (127.0.0.1, the host's network),
# KAFKA_HEAP_OPTS (after jvm.options' heap flags: they win), KAFKA_CLUSTER_ID (of new storage;
# default random), KAFKA_EXTRA_CONFIG (server.properties lines, appended last: they win),
# KAFKA_SCRAM_CREDENTIALS (lines MECHANISM=[name=USER,password=PASSWORD], written into new
# storage as it is formatted, as ops/stack.sh does: SASL listeners of KAFKA_EXTRA_CONFIG then
# know their SCRAM users from the first start).
set -euo pipefail
CONFIG=/opt/kafka/config
DATA=/var/lib/kafka/data
PROPERTIES=/tmp/server.properties
HOST=127.0.0.1

healthcheck() {
  # ApiVersions v0 (api key 18), correlation id 1, client id "hc": 12 bytes after the size.
  # The answer starts with its size, the correlation id (00000001) and the error code (0000).
  exec 3<>"/dev/tcp/$HOST/$KAFKA_PORT"
  printf '\x00\x00\x00\x0c\x00\x12\x00\x00\x00\x00\x00\x01\x00\x02hc' >&3
  local reply
  reply="$(timeout 5 head -c 10 <&3 | od -An -tx1 | tr -d ' \n')"
  [[ "${reply:8:12}" == 000000010000 ]]
}

start() {
  # ops/kafka/server.properties, shared with ops/stack.sh, then what differs here: plain
  # listeners on loopback (no SASL or TLS), the controller quorum, the data directory.
  {
    cat "$CONFIG/server.properties"
    echo
    echo "# docker-entrypoint.sh"
    echo "controller.quorum.voters=1@$HOST:$KAFKA_CONTROLLER_PORT"
    echo "listeners=PLAINTEXT://$HOST:$KAFKA_PORT,CONTROLLER://$HOST:$KAFKA_CONTROLLER_PORT"
    echo "advertised.listeners=PLAINTEXT://$HOST:$KAFKA_PORT"
    echo "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    echo "log.dirs=$DATA"
    [[ -z "${KAFKA_EXTRA_CONFIG:-}" ]] || printf '%s\n' "# KAFKA_EXTRA_CONFIG" "$KAFKA_EXTRA_CONFIG"
  } >"$PROPERTIES"
  local tool=(java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData
    "-Dlog4j2.configurationFile=$CONFIG/log4j2-tools.xml" -cp "/opt/kafka/libs/*")
  if [[ ! -e "$DATA/meta.properties" ]]; then
    local id="${KAFKA_CLUSTER_ID:-$("${tool[@]}" kafka.tools.StorageTool random-uuid)}"
    echo "formatting the storage in $DATA (cluster id $id)"
    local scram=() line
    while IFS= read -r line; do
      [[ -z "$line" ]] || scram+=(--add-scram "$line")
    done <<<"${KAFKA_SCRAM_CREDENTIALS:-}"
    "${tool[@]}" kafka.tools.StorageTool format --ignore-formatted -t "$id" -c "$PROPERTIES" \
      "${scram[@]}"
  fi
  echo "starting Kafka on $HOST:$KAFKA_PORT (controller $KAFKA_CONTROLLER_PORT); its log:" \
    "/var/log/kafka/server.log, warnings here"
  # shellcheck disable=SC2086  # KAFKA_HEAP_OPTS: words
  exec java "@$CONFIG/jvm.options" ${KAFKA_HEAP_OPTS:-} -Dkafka.logs.dir=/var/log/kafka \
    "-Dlog4j2.configurationFile=$CONFIG/log4j2.xml" -cp "/opt/kafka/libs/*" \
    kafka.Kafka "$PROPERTIES"
}

case "${1:-start}" in
start) start ;;
healthcheck) healthcheck ;;
*) exec "$@" ;;
esac
