#!/usr/bin/env bash
# Runs etcd and three xdsd replicas on this machine, on loopback, with the
# example configuration (examples/config) applied to etcd, until Ctrl-C.
# Needs the etcd binary (Debian: apt-get install etcd-server).
#
#   replica-1: xDS 127.0.0.1:18001, admin 127.0.0.1:19001 (and so on to 3)
#   etcd:      http://127.0.0.1:2379, data in a temporary directory
#
# Then, in another terminal:
#   go run ./cmd/xdsctl replicas --etcd-endpoints http://127.0.0.1:2379
#   go run ./examples/hello -only-client -xds-server localhost:18002
#   go run ./cmd/xdsctl apply --etcd-endpoints http://127.0.0.1:2379 --wait examples/config
set -euo pipefail
cd "$(dirname "$0")/../.."
etcd_url=http://127.0.0.1:2379
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT

go build -o "$tmp/xdsd" ./cmd/xdsd
go build -o "$tmp/xdsctl" ./cmd/xdsctl
etcd --name xdsd-example --data-dir "$tmp/etcd" \
  --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
  --initial-cluster xdsd-example=http://127.0.0.1:2380 --logger zap --log-level error &
for _ in $(seq 50); do   # etcd takes a moment to answer
  if "$tmp/xdsctl" apply --etcd-endpoints "$etcd_url" --timeout 1s --prune examples/config 2>/dev/null; then break; fi
  sleep 0.2
done
for i in 1 2 3; do
  "$tmp/xdsd" serve --etcd-endpoints "$etcd_url" --replica-name "replica-$i" \
    --xds-addr "127.0.0.1:1800$i" --admin-addr "127.0.0.1:1900$i" &
done
for _ in $(seq 50); do   # until the three have registered
  [ "$("$tmp/xdsctl" replicas --etcd-endpoints "$etcd_url" | grep -c APPLIED)" -eq 3 ] && break
  sleep 0.2
done
"$tmp/xdsctl" replicas --etcd-endpoints "$etcd_url"
echo "etcd and three replicas running; Ctrl-C stops them"
wait
