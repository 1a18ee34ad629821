#!/usr/bin/env bash
# Measures what a host shutdown costs with --on-stop hibernate: N running
# sandboxes (busybox, 256M, one idle process each) hibernated by dend's
# stop, beside the direct path, `den hibernate` of the same sandboxes one
# after another, in the same run. Prints both; fails on nothing but a
# broken setup. Run as root from the checkout after `make build`:
#
#   scripts/bench-shutdown.sh [N]
set -euo pipefail
n=${1:-4}
work=$(mktemp -d /var/tmp/den-bench-shutdown.XXXXXX)
sock=$work/dend.sock
export DEN_SOCKET=$sock
bin=$PWD/bin
start() {
	setsid "$bin/dend" --data-dir "$work/data" --socket "$sock" --on-stop hibernate --subnet 10.231.0.0/16 >>"$work/dend.log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do "$bin/den" ls >/dev/null 2>&1 && return; sleep 0.2; done
	echo "dend did not answer: $(tail -5 "$work/dend.log")" >&2; exit 1
}
stop() { kill -TERM "$pid"; wait "$pid" || true; }
cleanup() {
	start
	"$bin/den" rm -f $(seq -f 's%g' 1 "$n") >/dev/null 2>&1 || true
	kill -TERM "$pid"; wait "$pid" || true
	umount "$work/data/pool" 2>/dev/null || true
	losetup -j "$work/data/pool.img" | cut -d: -f1 | xargs -r losetup -d
	rm -rf "$work"
}
trap cleanup EXIT
start
for i in $(seq "$n"); do
	"$bin/den" create "s$i" --image busybox --memory 256M >/dev/null
	"$bin/den" exec -d "s$i" -- sleep 100000 >/dev/null
done
t0=$(date +%s.%N)
for i in $(seq "$n"); do "$bin/den" hibernate "s$i" >/dev/null; done
t1=$(date +%s.%N)
for i in $(seq "$n"); do "$bin/den" resume "s$i" >/dev/null; done
stop
took=$(grep -o 'msg="sandboxes hibernated at shutdown".*' "$work/dend.log" | tail -1)
echo "sandboxes: $n (busybox, 256M, one idle process each)"
echo "den hibernate, one after another: $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f ms", (b - a) * 1000 }')"
echo "dend's stop (--on-stop hibernate): $took"
