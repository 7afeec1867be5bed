#!/bin/sh
# A member of ops/stack.sh's replica set, run in the Redis image (docker-compose.replicas.yml
# and tests/integration/servers.py): a node, or a Sentinel, on its own copy of its
# configuration in /data, made on its first start only: the Sentinels rewrite it as roles
# change, so a restarted member keeps what it learnt (ops/stack.py does the same on a machine).
#   replica-set.sh node PORT [PRIMARY_PORT]            a primary, or with PRIMARY_PORT its replica
#   replica-set.sh sentinel PORT PRIMARY_PORT SERVICE  a Sentinel watching the primary
# Every member listens on 127.0.0.1 (the host's network).
set -eu
conf=/etc/neardup made=/data/made.conf
case "$1" in
node)
  if [ ! -e "$made" ]; then
    cp "$conf/replica-node.conf" "$made"
    [ -z "${3:-}" ] || echo "replicaof 127.0.0.1 $3" >>"$made"
  fi
  exec redis-server "$made" --include "$conf/persistence.conf" --port "$2" --dir /data
  ;;
sentinel)
  [ -e "$made" ] || sed -e "s/@PORT@/$2/" -e "s|@DIR@|/data|" -e "s/@PRIMARY_PORT@/$3/" \
    -e "s/@SERVICE@/$4/" "$conf/sentinel.conf" >"$made"
  exec redis-server "$made" --sentinel
  ;;
*)
  echo "usage: replica-set.sh node PORT [PRIMARY_PORT] | sentinel PORT PRIMARY_PORT SERVICE" >&2
  exit 2
  ;;
esac
