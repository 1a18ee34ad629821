#!/usr/bin/env bash
# den's own test of a host with systemd and cgroup v2 (the unified
# hierarchy), which most hosts run. `make test-hostvm` boots such a host
# (Debian 12 under qemu, ../shared/hostvm/run-in-vm) and runs this script in
# it as root, from the checkout with its built bin/ at /root/den.
#
# The blocks of the docs that need such a host run here, by name
# (run_docblock, scripts/hostvm-lib.sh): docs/install.md's make-install
# and rcu-expedited, docs/operations.md's backup.
#
# Boot 1: install as docs/install.md says (make install-files for make
# install: bin/ is built), start dend with systemd, and
# try limits (memory, disk cap), dend's watch of a quiet sandbox from its
# host cgroup (den-init must stop checking its limits), pause, hibernate,
# wake, checkpoint, fork, `systemctl restart dend` keeping the sandboxes,
# `den rm -f` without an engine death or a runsc cgroup error in the
# journal, and `systemctl stop dend` ending cleanly. Then it starts dend
# again with sandboxes running (one counting, with a service, one with
# --wake-on-boot) and
# asks for a reboot (exit 100).
# Boot 2: dend hibernated the running sandboxes at the shutdown and
# stopped with success, not "exit-code", came back at boot, woke the one
# with --wake-on-boot by itself, and the counting process of the other
# goes on from where it was when a call wakes it; rcu_expedited is still
# set; then a back-up with DEN_ON_STOP=hibernate, after which the
# sandboxes wake.
#
# Every check prints "ok:" or "FAIL:"; the script exits non-zero if any
# failed, with dend's journal. qemu emulates the CPU (10-30x slower than
# the host): waits are long, and nothing here is a time.
set -uo pipefail
# run-in-vm runs a copy of this script from the checkout's root, /root/den.
[ -f Makefile ] || cd "$(dirname "$0")/.." || exit 1

# ok, bad, waitfor, run_docblock
. scripts/hostvm-lib.sh
journal() { journalctl -u dend --no-pager -o short-iso "$@" | tail -80; }
die() {
	echo "FAIL: $*"
	echo "--- dend's journal"
	journal
	echo "HOSTVM-SUITE: FAILED (fatal)"
	exit 1
}
finish() {
	if [ "$failed" -gt 0 ]; then
		echo "--- dend's journal"
		journal "$@"
		echo "HOSTVM-SUITE: $failed check(s) FAILED"
		exit 1
	fi
	echo "HOSTVM-SUITE: all checks passed"
	exit 0
}
dend_up() { waitfor 600 "dend to answer" den ls; }
metrics() { curl -fsS http://127.0.0.1:9464/metrics; }
# series NAME SANDBOX: the value of a per-sandbox series in /metrics.
series() {
	metrics | awk -v s="$1{" -v n="name=\"$2\"" 'index($0, s) == 1 && index($0, n) { v = $2 } END { print v }'
}
# cgroup SANDBOX: its instance's host cgroup.
cgroup() {
	local id
	id=$(den inspect "$1" 2>/dev/null | awk -F'"' '$2 == "id" { print $4; exit }')
	ls -d /sys/fs/cgroup/den/"$id"-g* 2>/dev/null | tail -1
}
# init_reading SANDBOX AFTER: waits for den-init's next answer to dend's
# sampler newer than AFTER (Unix seconds) and prints "AT CHECKS".
init_reading() {
	local at
	for _ in $(seq 400); do
		at=$(series den_sandbox_init_read_timestamp_seconds "$1")
		if [ -n "$at" ] && awk -v a="$at" -v b="$2" 'BEGIN { exit !(a > b) }'; then
			echo "$at $(series den_sandbox_limit_checks_total "$1")"
			return 0
		fi
		sleep 1
	done
	return 1
}
state() { den ls 2>/dev/null | awk -v n="$1" '$1 == n { print $2 }'; }

boot=${HOSTVM_BOOT:-1}
echo "== hostvm suite, boot $boot: $(uname -r), cgroup fs $(stat -fc %T /sys/fs/cgroup), $(systemctl --version | head -1)"
[ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ] || die "this host is not on cgroup v2; the suite is for one that is"
[ -d /run/systemd/system ] || die "this host is not run by systemd"

if [ "$boot" = 1 ]; then
	# The journal of this boot must still be there after the reboot.
	mkdir -p /var/log/journal && systemd-tmpfiles --create --prefix /var/log/journal >/dev/null 2>&1
	journalctl --flush >/dev/null 2>&1
	command -v curl >/dev/null || die "curl is missing"

	echo "== install and start, as docs/install.md says"
	# Set before the install starts dend (a drop-in: the install writes
	# /etc/den/dend.env). qemu emulates the CPU 10-30x slower: a boot
	# beside three running sandboxes took den-init past the 15 s default
	# to answer; and hibernating at shutdown takes as much longer: the
	# bound and the unit's stop timeout above it are raised alike.
	mkdir -p /etc/systemd/system/dend.service.d
	printf '[Service]\nTimeoutStopSec=5m\nEnvironment=DEN_METRICS_LISTEN=127.0.0.1:9464 DEN_BOOT_TIMEOUT=2m DEN_SHUTDOWN_TIMEOUT=4m\n' \
		>/etc/systemd/system/dend.service.d/slow-host.conf
	# The block's make install, less the build and the man pages that
	# make install-files installs: bin/ was built on the host (make
	# test-hostvm), and compiling den under qemu would take an hour.
	run_docblock -r 'make install =make install-files ' docs/install.md make-install || die "installing and starting dend as docs/install.md says"
	systemctl is-enabled dend >/dev/null && ok "dend is enabled at boot" || bad "make install-files did not enable dend"
	systemctl is-active dend >/dev/null && ok "dend runs" || die "systemctl enable --now dend did not start dend"
	dend_up || die "dend did not come up"
	den version

	echo "== create, exec"
	# f is the host's first sandbox: runsc made /sys/fs/cgroup/den for it
	# unless dend made it first, and removing f must leave it to the rest.
	den create f --image busybox --memory 256M >/dev/null || die "den create f failed"
	den exec -d f -- sh -c 'while true; do date; sleep 1; done' >/dev/null || bad "exec -d in f"
	den create a --image busybox --memory 256M >/dev/null || die "den create a failed"
	[ "$(den exec a -- echo hello)" = hello ] && ok "exec in a" || bad "exec in a"
	den exec -d a -- sh -c 'echo $$ > /root/pid; i=0; while true; do i=$((i+1)); echo $i > /root/n; sleep 1; done' >/dev/null || bad "exec -d in a"
	[ -d /sys/fs/cgroup/den ] && ok "den's cgroup is /sys/fs/cgroup/den" || bad "no /sys/fs/cgroup/den"

	echo "== idle watching: den-init of a quiet sandbox does not check its limits"
	den create w --image busybox --memory 256M >/dev/null || die "den create w failed"
	den exec -d w -- sleep 100000 >/dev/null || bad "exec -d sleep in w"
	# w holds an idle sleep, under a memory limit: dend watches it from its
	# host cgroup and turns den-init's checks off. The window runs between
	# two answers of den-init to dend's sampler (every 30 s or so). With
	# its checks on, den-init checks 2-4 times a second; off, none. dend
	# judges busyness by host CPU, which qemu's emulation inflates about
	# 30x: on a loaded machine an idle sandbox now and then looks busy
	# for an interval here (this machine alone: 0; beside a second VM: 11
	# in 31 s; beside `make test`: 20 in 29 s), so the bound is half the
	# rate with checks on: under one check a second.
	sleep 20
	if r1=$(init_reading w 0) && r2=$(init_reading w "${r1%% *}"); then
		n=$(awk -v a="${r1#* }" -v b="${r2#* }" 'BEGIN { print b - a }')
		secs=$(awk -v a="${r1%% *}" -v b="${r2%% *}" 'BEGIN { printf "%.1f", b - a }')
		if awk -v n="$n" -v s="$secs" 'BEGIN { exit !(n <= 1 || n < s) }'; then
			ok "quiet w: den-init checked its limits $n times in ${secs}s"
		else
			bad "quiet w: den-init checked its limits $n times in ${secs}s (want none: dend watches it from the host)"
			cg=$(cgroup w)
			echo "w's cgroup $cg: memory.current $(cat "$cg/memory.current") memory.max $(cat "$cg/memory.max") $(grep usage_usec "$cg/cpu.stat")"
			sleep 10
			echo "10 s later: memory.current $(cat "$cg/memory.current") $(grep usage_usec "$cg/cpu.stat")"
		fi
	else
		bad "no two answers of w's den-init in /metrics: $(metrics | grep -c den_sandbox_) den_sandbox_ lines"
	fi

	echo "== limits"
	den create q --image busybox --memory 256M >/dev/null || die "den create q failed"
	den exec -d q -- sleep 100000 >/dev/null || bad "exec -d sleep in q"
	den exec q -- sh -c 'x=a; while :; do x="$x$x"; done'
	rc=$?
	[ "$rc" = 137 ] && ok "a memory hog is killed (exit $rc)" || bad "a memory hog in a 256M sandbox ended with exit $rc, want 137 (SIGKILL)"
	[ "$(den exec q -- echo alive)" = alive ] && ok "q lives on after its hog" || bad "q does not answer after its hog"
	cg=$(cgroup q)
	echo "(q's host memory after its hog: $(cat "$cg/memory.current" 2>/dev/null) of $(cat "$cg/memory.max" 2>/dev/null))"
	den create c --image busybox --disk 100M >/dev/null || die "den create c --disk 100M failed"
	out=$(den exec c -- sh -c 'dd if=/dev/zero of=/root/big bs=1M count=200 2>&1; echo rc=$?')
	case "$out" in
	*"Disk quota exceeded"*) ok "the disk cap holds" ;;
	*) bad "writing 200M under a 100M disk cap: $out" ;;
	esac

	echo "== pause, hibernate, wake, checkpoint, fork"
	sleep 2
	n1=$(den exec a -- cat /root/n)
	den pause a && den resume a && ok "pause, resume" || bad "pause/resume a"
	den hibernate a && ok "hibernate" || bad "hibernate a"
	[ "$(state a)" = hibernated ] || bad "a is $(state a) after hibernate"
	n2=$(den exec a -- cat /root/n)
	[ -n "$n2" ] && ok "woken by exec ($n1 then $n2)" || bad "exec wakes a: it printed \"$n2\""
	den checkpoint a --name c1 >/dev/null && ok "checkpoint" || bad "checkpoint a"
	den fork a b >/dev/null && [ -n "$(den exec b -- cat /root/n)" ] && ok "fork b" || bad "fork a into b"

	echo "== systemctl restart dend keeps sandboxes"
	before=$(den exec a -- cat /root/n)
	systemctl restart dend || bad "systemctl restart dend"
	dend_up
	sleep 3
	after=$(den exec a -- cat /root/n)
	if [ "$(state a)" = running ] && [ -n "$after" ] && [ "$after" -gt "$before" ]; then
		ok "a ran on across the restart ($before then $after)"
	else
		bad "after systemctl restart: a is $(state a), its counter $before then $after"
	fi

	echo "== den rm -f of running sandboxes, the first among them: no engine death, no runsc cgroup error"
	since=$(date +%s)
	sleep 1
	den rm -f f b c >/dev/null || bad "den rm -f f b c"
	sleep 5
	log=$(journalctl -u dend --no-pager -o cat --since "@$since")
	for pat in 'exited unexpectedly' 'lost its instance' 'removing cgroup path' 'level=ERROR'; do
		if grep -q "$pat" <<<"$log"; then
			bad "den rm -f logged \"$pat\": $(grep -m2 "$pat" <<<"$log")"
		fi
	done
	grep -qE 'exited unexpectedly|lost its instance|removing cgroup path|level=ERROR' <<<"$log" || ok "den rm -f logged nothing wrong"
	[ -d /sys/fs/cgroup/den ] && ok "den's parent cgroup stays" || bad "/sys/fs/cgroup/den went with a sandbox"
	left=$(find /sys/fs/cgroup/den -mindepth 1 -maxdepth 1 -type d | wc -l)
	[ "$left" = 3 ] && ok "one cgroup each for a, q and w" || bad "$left cgroups under /sys/fs/cgroup/den, want 3 (a, q, w): $(ls /sys/fs/cgroup/den)"

	echo "== systemctl stop dend"
	systemctl stop dend
	res=$(systemctl show dend -p Result --value) st=$(systemctl show dend -p ExecMainStatus --value)
	[ "$res" = success ] && [ "$st" = 0 ] && ok "systemctl stop: result $res, status $st" || bad "systemctl stop: result $res, status $st"
	[ -n "$(cat /sys/fs/cgroup/den/*/cgroup.procs 2>/dev/null)" ] && ok "sandboxes outlive dend" || bad "no sandbox runs after systemctl stop dend"

	echo "== systemctl stop while dend starts"
	systemctl start dend || die "systemctl start dend failed"
	sleep 0.5
	systemctl stop dend
	res=$(systemctl show dend -p Result --value) st=$(systemctl show dend -p ExecMainStatus --value)
	[ "$res" = success ] && ok "a stop while dend starts: result $res, status $st" || bad "a stop while dend starts: result $res, status $st"

	echo "== power off with dend running"
	systemctl start dend || die "systemctl start dend failed"
	dend_up
	den create h --image busybox >/dev/null && den exec h -- sh -c 'echo kept > /root/f && sync' && den hibernate h >/dev/null || bad "a hibernated h"
	[ "$(state a)" = running ] || bad "a is $(state a) before the power-off"
	den policy q --wake-on-boot >/dev/null || bad "den policy q --wake-on-boot"
	# A service den keeps running in a: the same process after the boot.
	den service add a tick -- sh -c 'while :; do date +%s >/root/tick; sleep 1; done' >/dev/null || bad "den service add a tick"
	waitfor 120 "a's service tick to run" sh -c 'den service ls a --json | grep -q "\"state\": *\"running\""'
	den service ls a --json | grep -o '"pid": *[0-9]*' | grep -o '[0-9]*$' >/root/hostvm-a-svc || bad "reading the pid of a's service"
	# a's counter is a process counting in its own memory: after the boot
	# the same process must go on from at least this count.
	den exec a -- sh -c 'cat /root/n /root/pid' >/root/hostvm-a-before || bad "reading a's count"
	echo "(a before the power-off: count and counter pid $(tr '\n' ' ' </root/hostvm-a-before))"
	echo "== expedited RCU grace periods, as docs/install.md says"
	run_docblock docs/install.md rcu-expedited
	[ "$(cat /sys/kernel/rcu_expedited)" = 1 ] && ok "rcu_expedited is 1 now" || bad "rcu_expedited is $(cat /sys/kernel/rcu_expedited) after the docs' block"
	journalctl --flush >/dev/null 2>&1
	echo "$failed" >/root/hostvm-suite-failed # counted on after the reboot
	exit 100 # run-in-vm reboots and runs this again with HOSTVM_BOOT=2
fi

echo "== after the power-off"
failed=$(cat /root/hostvm-suite-failed 2>/dev/null || echo 0)
[ "$failed" = 0 ] || echo "($failed check(s) failed in boot 1)"
prev=$(journalctl -b -1 -u dend --no-pager -o cat)
if grep -qE "Failed with result|status=[1-9]|code=exited, status=1" <<<"$prev"; then
	bad "dend failed at the power-off: $(grep -E 'Failed with result|status=|Main process' <<<"$prev" | tail -3)"
	echo "--- dend's journal at the power-off"
	journalctl -b -1 -u dend --no-pager -o short-iso | tail -60
elif grep -q "Stopped dend.service\|Deactivated successfully\|Stopped den" <<<"$prev"; then
	ok "dend stopped cleanly at the power-off: $(grep -E 'Deactivated|Stopped' <<<"$prev" | tail -1)"
else
	bad "no stop of dend in the last boot's journal: $(tail -5 <<<"$prev")"
fi
dend_up || die "dend did not start at boot"
systemctl is-active dend >/dev/null && ok "dend started at boot" || bad "dend is not active"
if grep -q "sandboxes hibernated at shutdown" <<<"$prev"; then
	ok "dend hibernated at the shutdown: $(grep -m1 'sandboxes hibernated at shutdown' <<<"$prev")"
else
	bad "no hibernation at the shutdown in the last boot's journal"
fi
grep "could not hibernate" <<<"$prev" && bad "a sandbox could not hibernate at the shutdown"
waitfor 600 "q to wake by itself (--wake-on-boot)" sh -c '[ "$(den ls 2>/dev/null | awk '"'"'$1 == "q" { print $2 }'"'"')" = running ]' &&
	ok "q, with --wake-on-boot, woke with dend"
[ "$(state a)" = hibernated ] && ok "a was hibernated at the shutdown" || bad "a is $(state a) after the reboot, want hibernated"
[ "$(state w)" = hibernated ] && ok "w waits hibernated for its next use" || bad "w is $(state w) after the reboot, want hibernated"
read -r n_before pid_before < <(tr '\n' ' ' </root/hostvm-a-before)
after=$(den exec a -- sh -c 'sleep 2; cat /root/n; kill -0 '"$pid_before"' && echo alive')
n_after=$(head -1 <<<"$after")
if [ "$(tail -1 <<<"$after")" = alive ] && [ -n "$n_after" ] && [ "$n_after" -gt "$n_before" ]; then
	ok "a's counting process (pid $pid_before) went on across the reboot ($n_before then $n_after)"
else
	bad "a's counter across the reboot: $n_before (pid $pid_before) before, after: $(tr '\n' ' ' <<<"$after")"
fi
svc_before=$(cat /root/hostvm-a-svc 2>/dev/null)
svc_after=$(den service ls a --json | grep -o '"pid": *[0-9]*' | grep -o '[0-9]*$')
t1=$(den exec a -- cat /root/tick)
sleep 3
t2=$(den exec a -- cat /root/tick)
if [ -n "$svc_before" ] && [ "$svc_after" = "$svc_before" ] && [ -n "$t1" ] && [ "$t2" -gt "$t1" ]; then
	ok "a's service tick (pid $svc_before) runs on across the reboot ($t1 then $t2)"
else
	bad "a's service across the reboot: pid $svc_before before, $svc_after after; ticks $t1 then $t2"
fi
[ "$(den exec h -- cat /root/f)" = kept ] && ok "hibernated h wakes after the reboot" || bad "h does not wake after the reboot"
[ "$(cat /sys/kernel/rcu_expedited)" = 1 ] && ok "rcu_expedited is 1 after the reboot (tmpfiles.d)" || bad "rcu_expedited is $(cat /sys/kernel/rcu_expedited) after the reboot: /etc/tmpfiles.d/den-rcu.conf did not hold"

echo "== a back-up of the data directory, as docs/operations.md says"
mkdir -p /backup # the operator's back-up disk
since=$(date +%s)
sleep 1
run_docblock docs/operations.md backup
dend_up || die "dend did not come back after the back-up"
log=$(journalctl -u dend --no-pager -o cat --since "@$since")
grep -q "sandboxes hibernated at shutdown" <<<"$log" && ok "DEN_ON_STOP=hibernate: the stop hibernated the sandboxes" ||
	bad "the back-up's stop did not hibernate: $(grep -iE 'hibernat|leave' <<<"$log" | tail -3)"
tar -tzf /backup/den-data.tar.gz | grep -qx 'den/den.db' && ok "the back-up holds den/den.db" || bad "no den/den.db in /backup/den-data.tar.gz"
[ "$(state a)" = hibernated ] && ok "a was hibernated for the back-up" || bad "a is $(state a) after the back-up, want hibernated"
[ "$(den exec h -- cat /root/f)" = kept ] && ok "h wakes after the back-up" || bad "h does not wake after the back-up"
den rm -f a h q w >/dev/null || bad "den rm -f a h q w"
systemctl stop dend
finish -b
