#!/usr/bin/env bash
# neardup's images and docker-compose.yml on a Debian machine, each step only when missing:
#   ops/docker.sh install   Debian's docker.io, docker-compose (1.29) and mmdebstrap, with apt
#   ops/docker.sh engine    start dockerd (no iptables, no bridge: containers use the host's
#                           network), its data and log under the state dir; none if one answers
#   ops/docker.sh base      the base image debian:bookworm-slim, made with mmdebstrap from the
#                           machine's own Debian sources and `docker import`ed under that name,
#                           when it is absent (where an image registry answers, `docker pull
#                           debian:bookworm-slim` gives the same name)
#   ops/docker.sh build     the three images (neardup, neardup-kafka, neardup-redis), then
#                           their sizes
#   ops/docker.sh up [N]    docker-compose.yml with N detectors (default 1): returns once Kafka
#                           and Redis are healthy and the detectors started (each waits for
#                           the input topic, `neardup produce --partitions N` makes it)
#   ops/docker.sh down      the compose project (its volumes kept), then the dockerd that
#                           `engine` started
#   ops/docker.sh status    the engine, the images and their sizes, the project's containers
#   ops/docker.sh all       install, engine, base, build
# Each step prints how long it took. Environment, all optional:
#   NEARDUP_STACK_DOCKER_DIR   dockerd's data, exec root, pid and log    (/tmp/neardup-docker)
#   NEARDUP_STACK_DOCKER_PROJECT  the compose project name                (neardup)
# and docker-compose.yml's ports: NEARDUP_STACK_DOCKER_KAFKA_PORT (29092),
# NEARDUP_STACK_DOCKER_KAFKA_CONTROLLER_PORT (29093), NEARDUP_STACK_DOCKER_REDIS_PORT (16379),
# NEARDUP_STACK_DOCKER_METRICS_PORT (9464, the first of the detectors' ports).
# (NEARDUP_STACK_* because neardup refuses any other NEARDUP_* name it does not know.)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="${NEARDUP_STACK_DOCKER_DIR:-/tmp/neardup-docker}"
PROJECT="${NEARDUP_STACK_DOCKER_PROJECT:-neardup}"
SOCKET=/var/run/docker.sock
BASE=debian:bookworm-slim
# image name, Dockerfile, build context (the repository's root: the detector's wheel needs
# the package; ops/<service>/ for the servers, whose Dockerfiles copy their configuration
# from there, the files ops/stack.sh runs them with)
IMAGES=(
  "neardup-redis ops/redis/Dockerfile ops/redis"
  "neardup-kafka ops/kafka/Dockerfile ops/kafka"
  "neardup Dockerfile ."
)

say() { echo "[docker] $*" >&2; }
fail() { say "ERROR: $*"; exit 1; }
timed() {  # timed WHAT COMMAND...: run it, then say how long it took
  local what="$1" t0=$SECONDS
  shift
  "$@"
  say "$what: $((SECONDS - t0)) s"
}

compose() {
  # Compose v2 (the docker CLI plugin) where it is installed, else Debian 12's docker-compose
  # 1.29 (Python); both read docker-compose.yml as it is.
  if docker compose version >/dev/null 2>&1; then
    docker compose -p "$PROJECT" -f "$ROOT/docker-compose.yml" "$@"
  else
    docker-compose -p "$PROJECT" -f "$ROOT/docker-compose.yml" "$@"
  fi
}

engine_answers() { docker info >/dev/null 2>&1; }

apt_install() {
  local log="$STATE/apt.log" made=0
  mkdir -p "$STATE"
  say "apt-get install $* (log: $log)"
  apt-get -q -o DPkg::Lock::Timeout=300 update >"$log" 2>&1 || { tail -20 "$log"; fail "apt-get update failed"; }
  # no package's service may start (this script starts dockerd itself): a policy-rc.d that
  # refuses, as ops/stack.py does for redis-server
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && made=1
  fi
  local ok=0
  DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=300 install -y \
    --no-install-recommends "$@" >>"$log" 2>&1 || ok=$?
  [[ $made == 1 ]] && rm -f /usr/sbin/policy-rc.d
  [[ $ok == 0 ]] || { tail -30 "$log"; fail "apt-get install $* failed"; }
}

cmd_install() {
  local missing=()
  command -v dockerd >/dev/null || missing+=(docker.io)
  # a docker CLI of its own (docker.io brings one) is enough; compose: the plugin, else 1.29
  docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null || missing+=(docker-compose)
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  if [[ ${#missing[@]} == 0 ]]; then
    say "installed: dockerd, compose, mmdebstrap"
    return
  fi
  [[ $(id -u) == 0 ]] || fail "run as root to install ${missing[*]} (or install them yourself)"
  apt_install "${missing[@]}"
}

cmd_engine() {
  if engine_answers; then
    say "a Docker engine answers at ${DOCKER_HOST:-unix://$SOCKET}"
    return
  fi
  command -v dockerd >/dev/null || fail "no dockerd: run 'ops/docker.sh install' first"
  [[ $(id -u) == 0 ]] || fail "dockerd runs as root here: run as root, or start your own engine"
  mkdir -p "$STATE"
  say "starting dockerd (data in $STATE/data, log $STATE/dockerd.log)"
  # No iptables rules and no docker0 bridge: this machine's kernel and firewall are left
  # alone, so every container runs on the host's network (docker-compose.yml says so, and
  # builds take --network host).
  setsid dockerd --iptables=false --ip-masq=false --bridge=none \
    --data-root "$STATE/data" --exec-root "$STATE/exec" --pidfile "$STATE/dockerd.pid" \
    -H "unix://$SOCKET" </dev/null >>"$STATE/dockerd.log" 2>&1 &
  local deadline=$((SECONDS + 60))
  until engine_answers; do
    if ! kill -0 $! 2>/dev/null; then
      tail -20 "$STATE/dockerd.log" >&2
      fail "dockerd exited while starting"
    fi
    ((SECONDS < deadline)) || { tail -20 "$STATE/dockerd.log" >&2; fail "dockerd did not answer within 60 s"; }
    sleep 0.5
  done
  say "dockerd is up (pid $(cat "$STATE/dockerd.pid")): $(docker info --format '{{.ServerVersion}}, {{.Driver}}, cgroup v{{.CgroupVersion}}')"
}

cmd_base() {
  engine_answers || fail "no Docker engine answers: run 'ops/docker.sh engine' first"
  if docker image inspect "$BASE" >/dev/null 2>&1; then
    say "$BASE is there"
    return
  fi
  command -v mmdebstrap >/dev/null || fail "no mmdebstrap: run 'ops/docker.sh install' first"
  local sources=/etc/apt/sources.list.d/debian.sources
  [[ -f $sources ]] || sources=/etc/apt/sources.list
  mkdir -p "$STATE"
  say "making $BASE with mmdebstrap from $sources (log: $STATE/mmdebstrap.log)"
  # As slim as the official image: no manual pages, documentation or translations (dpkg
  # leaves them out, in the image's later installs too), and apt keeps no packages or
  # caches after an install (the official image's /etc/apt/apt.conf.d/docker-clean).
  cat >"$STATE/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  mmdebstrap --variant=apt --mode=root \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --customize-hook="copy-in $STATE/docker-clean /etc/apt/apt.conf.d/" \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
    bookworm "$STATE/base.tar" "$sources" >"$STATE/mmdebstrap.log" 2>&1 ||
    { tail -30 "$STATE/mmdebstrap.log" >&2; fail "mmdebstrap failed"; }
  docker import --change 'CMD ["bash"]' "$STATE/base.tar" "$BASE" >/dev/null
  rm -f "$STATE/base.tar"
  say "$BASE made: $(docker image inspect --format '{{.Size}}' "$BASE" | numfmt --to=iec) "
}

cmd_build() {
  engine_answers || fail "no Docker engine answers: run 'ops/docker.sh engine' first"
  docker image inspect "$BASE" >/dev/null 2>&1 || fail "no $BASE: 'ops/docker.sh base' (or docker pull)"
  mkdir -p "$STATE"
  local image dockerfile context cas t0
  cas="$(extra_cas)"
  [[ -z $cas ]] || say "the builders trust $(grep -c 'BEGIN CERT' <<<"$cas") CA certificate(s) of this machine's beyond Debian's"
  for line in "${IMAGES[@]}"; do
    read -r image dockerfile context <<<"$line"
    say "building $image ($dockerfile; log: $STATE/build-$image.log)"
    # The classic builder (DOCKER_BUILDKIT=0): it takes the base image from the engine's
    # store as it is (BuildKit would ask a registry for its metadata first), and needs no
    # buildx plugin, which Debian 12 does not package.
    t0=$SECONDS
    env DOCKER_BUILDKIT=0 docker build --network host --build-arg EXTRA_CA_CERTS="$cas" \
      -t "$image" -f "$ROOT/$dockerfile" "$ROOT/$context" >"$STATE/build-$image.log" 2>&1 ||
      { tail -40 "$STATE/build-$image.log" >&2; fail "building $image failed"; }
    say "built $image: $((SECONDS - t0)) s, $(docker image inspect --format '{{.Size}}' "$image" | numfmt --to=si)B"
  done
  sizes
}

extra_cas() {
  # The CA certificates this machine trusts beyond those Debian ships (a TLS-intercepting
  # proxy's, a company's), PEM, for the builder stages that fetch over HTTPS (Maven, pip,
  # cargo): a build trusts what its machine trusts. Empty on a machine with Debian's alone.
  python3 - <<'PY'
import glob, re
def pem(path):
    with open(path, errors="replace") as f:
        return re.findall(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", f.read(), re.S)
def key(cert):
    return "".join(cert.split())
known = {key(c) for f in glob.glob("/usr/share/ca-certificates/**/*.crt", recursive=True) for c in pem(f)}
try:
    print("\n".join(c for c in pem("/etc/ssl/certs/ca-certificates.crt") if key(c) not in known))
except OSError:
    pass
PY
}

sizes() {
  docker image ls --format '{{.Repository}}:{{.Tag}}\t{{.Size}}' |
    grep -E "^(neardup(-kafka|-redis)?|${BASE%%:*}):" | sort >&2 || true
}

cmd_up() {
  local n="${1:-1}"
  engine_answers || fail "no Docker engine answers: run 'ops/docker.sh engine' first"
  say "compose up with $n detector(s)"
  compose up -d --scale "detector=$n"
  compose ps
}

cmd_down() {
  if engine_answers; then
    compose down --remove-orphans || true
  fi
  local pid
  pid="$(cat "$STATE/dockerd.pid" 2>/dev/null || true)"
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && grep -q dockerd "/proc/$pid/cmdline"; then
    say "stopping dockerd (pid $pid)"
    kill "$pid"
    for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      fail "dockerd (pid $pid) did not stop within 30 s"
    fi
    # dockerd leaves its default network namespace mounted under its exec root
    if mountpoint -q "$STATE/exec/netns/default" 2>/dev/null; then
      umount "$STATE/exec/netns/default" || true
    fi
    say "dockerd stopped"
  else
    say "no dockerd of ours runs"
  fi
  rm -f "$STATE/dockerd.pid"
}

cmd_status() {
  if ! engine_answers; then
    echo "engine: not answering"
    return 1
  fi
  echo "engine: $(docker info --format '{{.ServerVersion}}, {{.Driver}}') (pid $(cat "$STATE/dockerd.pid" 2>/dev/null || echo "not ours"))"
  sizes 2>&1
  compose ps
}

main() {
  local command="${1:-help}"
  shift || true
  case "$command" in
  install) timed install cmd_install ;;
  engine) timed engine cmd_engine ;;
  base) timed base cmd_base ;;
  build) timed build cmd_build ;;
  up) timed up cmd_up "$@" ;;
  down) timed down cmd_down ;;
  status) cmd_status ;;
  all)
    timed install cmd_install
    timed engine cmd_engine
    timed base cmd_base
    timed build cmd_build
    ;;
  help | -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2 ;;
  *)
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
    ;;
  esac
}

main "$@"
