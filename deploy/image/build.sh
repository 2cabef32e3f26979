#!/usr/bin/env bash
# Builds the cutkv image FROM scratch (no pull): kvnode and kvctl built
# static (CGO_ENABLED=0), the host's CA bundle for S3 stores over HTTPS, a
# non-root user (uid 65532, "cutkv"). Usage: deploy/image/build.sh [TAG]
# (default cutkv:dev). The version is the commit, as kvnode version shows.
set -euo pipefail
cd "$(dirname "$0")/../.."
TAG=${1:-cutkv:dev}
GO=${GO:-go}
CA=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
if [[ ! -s $CA ]]; then
	if command -v apt-get >/dev/null; then
		echo "build-image: no CA bundle at $CA; installing Debian's ca-certificates" >&2
		apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q ca-certificates >/dev/null
	fi
	[[ -s $CA ]] || { echo "build-image: no CA bundle at $CA: install ca-certificates or set CA_BUNDLE" >&2; exit 1; }
fi
if ! docker info >/dev/null 2>&1; then
	echo "build-image: no Docker engine answers (docker info failed): start dockerd, or run as a user allowed to use it" >&2
	exit 1
fi
CTX=$(mktemp -d /tmp/cutkv-image.XXXXXX)
trap 'rm -rf "$CTX"' EXIT
for cmd in kvnode kvctl; do
	CGO_ENABLED=0 $GO build -trimpath -ldflags "-s -w" -o "$CTX/$cmd" "./cmd/$cmd"
done
cp "$CA" "$CTX/ca-certificates.crt"
printf 'root:x:0:0:root:/:/sbin/nologin\ncutkv:x:65532:65532:cutkv:/var/lib/cutkv:/sbin/nologin\n' >"$CTX/passwd"
printf 'root:x:0:\ncutkv:x:65532:\n' >"$CTX/group"
mkdir "$CTX/empty"
cp deploy/image/Dockerfile "$CTX/"
docker build -q -t "$TAG" "$CTX" >/dev/null
echo "built $TAG: $(docker image inspect -f '{{.Id}} {{.Size}} bytes' "$TAG")"
