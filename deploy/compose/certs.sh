#!/usr/bin/env bash
# Makes the compose cluster's certificates once, in deploy/compose/certs:
# a CA, a certificate per node naming it as the other containers dial it
# (nN) and as the host does (127.0.0.1, localhost), client certificates
# for the roles admin, write and read, and a gossip key. The node runs as
# uid 65532: as root the files are given to it; otherwise they are made
# readable to all (fine for a local cluster, not for keys that matter).
# Usage: [KVCTL=bin/kvctl] [CERTS_DIR=deploy/compose/certs] deploy/compose/certs.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
KVCTL=${KVCTL:-$here/../../bin/kvctl}
dir=${CERTS_DIR:-$here/certs}
if [[ -f $dir/ca.crt ]]; then
	echo "certificates already in $dir (remove the directory to make new ones)"
	exit 0
fi
mkdir -p "$dir"
"$KVCTL" cert create-ca --dir "$dir" >/dev/null
for i in 1 2 3; do
	"$KVCTL" cert create-node "n$i" --hosts "n$i,localhost,127.0.0.1" --dir "$dir" --ca-dir "$dir" >/dev/null
done
for role in admin write read; do
	"$KVCTL" cert create-client "$role" --role "$role" --dir "$dir" --ca-dir "$dir" >/dev/null
done
head -c 32 /dev/urandom | base64 >"$dir/gossip.key"
if [[ $(id -u) == 0 ]]; then
	chown -R 65532:65532 "$dir"
	chmod 0700 "$dir"
else
	echo "certs.sh: not root: making $dir readable to all so that the containers' uid 65532 can read it" >&2
	chmod -R a+rX "$dir"
fi
echo "certificates in $dir; kvctl from this machine:"
echo "  export CUTKV_CACERT=$dir/ca.crt CUTKV_CERT=$dir/admin.crt CUTKV_KEY=$dir/admin.key"
