# What the scripts run-in-vm runs share (sourced, from the checkout's
# root): ok and bad print a check's result and count the failures in
# $failed; waitfor retries a command; run_docblock runs a docs block.
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
# run_docblock [-r OLD=NEW]... FILE NAME: runs the docs' ```sh {vm: NAME}
# block of FILE, as integration/docblock/extract prints it (with each
# -r's replacement), in bash -e from the current directory: a check.
run_docblock() {
	local script
	if ! script=$(docblock_extract "$@"); then
		bad "extracting the docs' block: docblock_extract $*"
		return 1
	fi
	echo "$script" | sed 's/^/  | /'
	if bash -eo pipefail -c "$script"; then
		ok "the docs' block ${*: -2:1} {vm: ${*: -1}}"
	else
		bad "the docs' block ${*: -2:1} {vm: ${*: -1}} failed"
		return 1
	fi
}
# docblock_extract ARGS: integration/docblock/extract, built once into
# /root/docblock (bin/docblock when the host built it: compiling under
# qemu takes minutes) from the checkout at /root/den.
docblock_extract() {
	local go=go
	if [ ! -x /root/docblock ]; then
		if [ -x /root/den/bin/docblock ]; then
			cp /root/den/bin/docblock /root/docblock
		else
			command -v go >/dev/null || go=/usr/local/go/bin/go
			(cd /root/den && CGO_ENABLED=0 GOFLAGS=-mod=readonly "$go" build -o /root/docblock ./integration/docblock/extract) || return 1
		fi
	fi
	/root/docblock "$@"
}
