#!/usr/bin/env bash
# Starts a 3-node cutkv cluster on 127.0.0.1 in the foreground (make run).
# Client gRPC 7001-7003, peer 7301-7303, gossip 7101-7103, HTTP 7201-7203,
# data under ./data/n1..n3, logs in ./data/nN/kvnode.log. The nodes take a
# consistent cut every 10s (--cut-interval; flags in $CUTKV_RUN_FLAGS come
# after it and win, e.g. CUTKV_RUN_FLAGS="--cut-interval 0" turns it off).
# Ctrl-C (or SIGTERM) stops every node gracefully; a second Ctrl-C stops
# them at once. Running it again reuses the data.
#
# CUTKV_TLS=1 (make run-secure) makes a CA, node, client and gossip keys
# under $CUTKV_DATA/certs once, and runs with TLS everywhere: mutual TLS
# between peers, client certificates with roles, encrypted gossip.
set -u
cd "$(dirname "$0")/.."
BIN=${BIN:-./bin}
DATA=${CUTKV_DATA:-./data}
TLS=${CUTKV_TLS:-0}
EXTRA_FLAGS=${CUTKV_RUN_FLAGS:-}
initial="n1=127.0.0.1:7301,n2=127.0.0.1:7302,n3=127.0.0.1:7303"
pids=()

stop() {
	trap - INT TERM
	echo "stopping cluster..."
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	trap 'echo "second signal: killing nodes"; for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done' INT TERM
	wait
	echo "cluster stopped"
	exit 0
}
trap stop INT TERM

# One snapshot store for the whole local cluster: whichever node leads
# group 0 writes there, and every node uploads its partitions there.
mkdir -p "$DATA/snapshots"
store="file://$(cd "$DATA/snapshots" && pwd)"

certs="$DATA/certs"
if [ "$TLS" = 1 ] && [ ! -f "$certs/ca.crt" ]; then
	echo "making a local CA and certificates in $certs"
	"$BIN/kvctl" cert create-ca --dir "$certs" >/dev/null || exit 1
	for i in 1 2 3; do
		"$BIN/kvctl" cert create-node "n$i" --hosts 127.0.0.1,localhost --dir "$certs" --ca-dir "$certs" >/dev/null || exit 1
	done
	for role in admin write read; do
		"$BIN/kvctl" cert create-client "$role" --role "$role" --dir "$certs" --ca-dir "$certs" >/dev/null || exit 1
	done
	head -c 32 /dev/urandom | base64 >"$certs/gossip.key"
	chmod 600 "$certs/gossip.key"
fi

for i in 1 2 3; do
	mkdir -p "$DATA/n$i"
	join=""
	for j in 1 2 3; do [ "$j" != "$i" ] && join="${join:+$join,}127.0.0.1:710$j"; done
	tls_flags=""
	if [ "$TLS" = 1 ]; then
		tls_flags="--peer-cert-file $certs/n$i.crt --peer-key-file $certs/n$i.key --peer-trusted-ca-file $certs/ca.crt"
		tls_flags="$tls_flags --cert-file $certs/n$i.crt --key-file $certs/n$i.key --trusted-ca-file $certs/ca.crt"
		tls_flags="$tls_flags --gossip-key-file $certs/gossip.key"
	fi
	# shellcheck disable=SC2086
	setsid "$BIN/kvnode" --id "n$i" --data-dir "$DATA/n$i" \
		--grpc-addr "127.0.0.1:700$i" --peer-addr "127.0.0.1:730$i" --gossip-addr "127.0.0.1:710$i" --http-addr "127.0.0.1:720$i" \
		--join "$join" --initial-cluster "$initial" --cut-interval 10s --snapshot-store "$store" $tls_flags $EXTRA_FLAGS \
		2>>"$DATA/n$i/kvnode.log" &
	pids+=("$!")
done
echo "starting 3 nodes (logs: $DATA/n1/kvnode.log ...); Ctrl-C stops them"
if [ "$TLS" = 1 ]; then
	echo "TLS everywhere. Use kvctl with a client certificate (roles: admin, write, read):"
	echo "  export CUTKV_CACERT=$certs/ca.crt CUTKV_CERT=$certs/admin.crt CUTKV_KEY=$certs/admin.key"
	echo "  $BIN/kvctl put greeting hello"
	echo "or: $BIN/kvctl --cacert $certs/ca.crt --cert $certs/read.crt --key $certs/read.key get greeting"
fi

# If any node exits on its own, report it and stop the others.
while true; do
	for idx in "${!pids[@]}"; do
		if ! kill -0 "${pids[$idx]}" 2>/dev/null; then
			wait "${pids[$idx]}"; rc=$?
			n=$((idx + 1))
			echo "node n$n exited with status $rc; last log lines:" >&2
			tail -n 5 "$DATA/n$n/kvnode.log" >&2
			unset 'pids[idx]'
			stop
		fi
	done
	sleep 1 &
	wait $! 2>/dev/null
done
