# What the scripts run-in-vm runs share (sourced, from the checkout's
# root): ok and bad print a check's result and count the failures in
# $failed; waitfor retries a command.
failed=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
# waitfor TRIES WHAT CMD...: run CMD every second until it succeeds.
waitfor() {
	local n=$1 what=$2
	shift 2
	for _ in $(seq "$n"); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 1
	done
	bad "$what (gave up after ${n}s)"
	return 1
}
