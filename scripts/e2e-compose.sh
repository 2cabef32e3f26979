#!/usr/bin/env bash
# make e2e-compose: the image and the compose cluster as a user runs them.
# Builds the image (deploy/image/build.sh), brings deploy/compose up under
# its own project name, writes and reads with kvctl from this machine (TLS,
# the published 127.0.0.1 ports), kills a container and keeps writing,
# restarts it and reads everything back, takes a snapshot and restores it
# onto a fresh one-node cluster in a container of its own, then does a
# rolling restart onto a rebuilt image following docs/operations.md
# ("Upgrading"), checking each node ready before the next, and tears
# everything down. Skips (exit 0) when no Docker engine answers.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! docker info >/dev/null 2>&1; then
	echo "e2e-compose: skipped: no Docker engine answers (docker info failed)"
	exit 0
fi
COMPOSE=${COMPOSE:-docker-compose}
# need CMD PACKAGE: installs Debian's PACKAGE with apt-get when CMD is missing.
need() {
	command -v "$1" >/dev/null && return 0
	echo "e2e-compose: $1 is missing; installing Debian's $2 with apt-get" >&2
	if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$2"; } >/dev/null 2>&1 || ! command -v "$1" >/dev/null; then
		echo "e2e-compose: could not install $2 (needs root and apt); install it and retry" >&2
		exit 1
	fi
}
need "$COMPOSE" docker-compose
need curl curl
PROJECT=cutkve2e$$
WORK=$(mktemp -d /tmp/cutkv-e2e-compose.XXXXXX)
IMAGE=cutkv:e2e-$$
NEXT=cutkv:e2e-next-$$
BIN=$PWD/bin
log() { echo "$(date -u +%H:%M:%S) $*" >&2; }
dc() { CUTKV_IMAGE=${CUTKV_IMAGE:-$IMAGE} "$COMPOSE" -p "$PROJECT" -f "$WORK/docker-compose.yml" "$@"; }
cleanup() {
	rc=$?
	if [[ $rc != 0 ]]; then
		log "failed (status $rc); last node logs:"
		dc logs --tail 20 >&2 || true
		docker logs --tail 20 "$PROJECT-restored" >&2 2>/dev/null || true
	fi
	docker rm -f "$PROJECT-restored" >/dev/null 2>&1 || true
	dc down -v --remove-orphans >/dev/null 2>&1 || true
	docker volume rm "$PROJECT-restored" >/dev/null 2>&1 || true
	docker image rm "$IMAGE" "$NEXT" >/dev/null 2>&1 || true
	rm -rf "$WORK"
	exit $rc
}
trap cleanup EXIT

make -s build
log "building $IMAGE"
deploy/image/build.sh "$IMAGE"
cp deploy/compose/docker-compose.yml "$WORK/"
CERTS_DIR=$WORK/certs KVCTL=$BIN/kvctl deploy/compose/certs.sh >/dev/null
export CUTKV_CACERT=$WORK/certs/ca.crt CUTKV_CERT=$WORK/certs/admin.crt CUTKV_KEY=$WORK/certs/admin.key
export CUTKV_ENDPOINTS=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003
kv() { "$BIN/kvctl" --timeout 10s "$@"; }

# ready N: /readyz of node N answers 200 (HTTPS: TLS is on), within 120 s.
ready() {
	local n=$1 deadline=$((SECONDS + 120))
	until curl -fsS --cacert "$WORK/certs/ca.crt" "https://127.0.0.1:720$n/readyz" >/dev/null 2>&1; do
		if ((SECONDS > deadline)); then
			log "n$n not ready after 120 s: $(curl -sS --cacert "$WORK/certs/ca.crt" "https://127.0.0.1:720$n/readyz" 2>&1)"
			return 1
		fi
		sleep 1
	done
}
# retry CMD...: a command that may fail while a node restarts, 30 tries.
retry() {
	local i
	for i in $(seq 30); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 1
	done
	"$@"
}
# write FROM TO: put key-I = value-I.
write() { local i; for i in $(seq "$1" "$2"); do retry kv put "key-$i" "value-$i"; done; }
# check FROM TO: every key-I reads value-I.
check() {
	local i got
	for i in $(seq "$1" "$2"); do
		got=
		for _ in $(seq 30); do
			got=$(kv get "key-$i" 2>/dev/null) && break
			sleep 1
		done
		[[ $got == "value-$i" ]] || { log "key-$i = '$got', want value-$i ($(kv get "key-$i" 2>&1))"; return 1; }
	done
}

log "up: 3 nodes ($PROJECT)"
dc up -d
for n in 1 2 3; do ready "$n"; done
write 1 50
check 1 50
log "wrote and read 50 keys"

log "killing n2, writing on"
dc kill n2 >/dev/null
write 51 100
check 51 100
log "restarting n2"
dc start n2 >/dev/null
ready 2
check 1 100
kv check >/dev/null
log "n2 back; all 100 keys read, replicas consistent (kvctl check)"

snap=$(kv snapshot create -o json | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' | head -n1)
[[ -n $snap ]] || { log "no snapshot id in kvctl snapshot create's output"; exit 1; }
log "snapshot $snap taken; restoring it onto a one-node cluster"
docker volume create "$PROJECT-restored" >/dev/null
docker run --rm --network none -v "${PROJECT}_snapshots:/snapshots:ro" -v "$PROJECT-restored:/var/lib/cutkv" "$IMAGE" \
	restore --store file:///snapshots --snapshot "$snap" --data-dir /var/lib/cutkv/data --id n1 --initial-cluster n1=127.0.0.1:7311 >&2
docker run -d --name "$PROJECT-restored" -p 127.0.0.1:7011:7011 -p 127.0.0.1:7211:7211 \
	-v "$PROJECT-restored:/var/lib/cutkv" -v "$WORK/certs:/certs:ro" "$IMAGE" \
	--id n1 --data-dir /var/lib/cutkv/data --grpc-addr 0.0.0.0:7011 --peer-addr 127.0.0.1:7311 --gossip-addr 127.0.0.1:7111 --http-addr 0.0.0.0:7211 \
	--advertise-grpc 127.0.0.1:7011 --initial-cluster n1=127.0.0.1:7311 \
	--cert-file /certs/n1.crt --key-file /certs/n1.key --trusted-ca-file /certs/ca.crt \
	--peer-cert-file /certs/n1.crt --peer-key-file /certs/n1.key --peer-trusted-ca-file /certs/ca.crt --gossip-key-file /certs/gossip.key >/dev/null
deadline=$((SECONDS + 120))
until curl -fsS --cacert "$WORK/certs/ca.crt" https://127.0.0.1:7211/readyz >/dev/null 2>&1; do
	((SECONDS < deadline)) || { log "the restored node is not ready after 120 s"; exit 1; }
	sleep 1
done
CUTKV_ENDPOINTS=127.0.0.1:7011 check 1 100
log "the restored cluster serves all 100 keys"
docker rm -f "$PROJECT-restored" >/dev/null

log "rolling restart onto a rebuilt image ($NEXT)"
deploy/image/build.sh "$NEXT"
i=100
for n in 1 2 3; do
	CUTKV_IMAGE=$NEXT dc up -d --no-deps n$n >/dev/null 2>&1
	ready "$n"
	[[ $(docker inspect -f '{{.Config.Image}}' "$(dc ps -q n$n)") == "$NEXT" ]] || { log "n$n does not run $NEXT"; exit 1; }
	write $((i + 1)) $((i + 10))
	i=$((i + 10))
	log "n$n runs $NEXT and is ready; writes go on"
done
check 1 "$i"
kv check >/dev/null
log "done: $i keys read back after the rolling restart; replicas consistent"
