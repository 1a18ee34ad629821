#!/usr/bin/env bash
# An upgrade through the package, and a rollback, on a fresh host: after
# `make dist dist-prev` on the host (dist/ holds this checkout's .deb,
# dist/prev/ the previous release's), `../shared/hostvm/run-in-vm
# scripts/hostvm-upgrade.sh` boots Debian 12 with systemd under qemu and
# runs this script in it as root, from a copy of the checkout at
# /root/den.
#
# `apt install` of the previous release; under its dend, a running
# sandbox with a process counting, a paused one, and a hibernated one
# with a checkpoint; `apt install` of this checkout's package over it.
# The new dend takes each over: the same process counts on, the paused
# one is still paused and resumes, the hibernated one wakes with its
# process, the old checkpoint restores. Then the rollback: `apt install
# --allow-downgrades` of the previous package, which takes them back,
# or, when the store's schema changed between the two, refuses to start
# and says so (and the upgrade again brings everything back).
#
# The upgrade, its checks and the rollback are docs/upgrades.md's blocks
# deb-upgrade, upgrade-check and deb-rollback, run by name (run_docblock).
#
# Every check prints "ok:" or "FAIL:"; the script exits non-zero if any
# failed, with dend's journal. qemu emulates the CPU: waits are long, and
# nothing here is a time.
set -uo pipefail
# run-in-vm runs a copy of this script from the checkout's root, /root/den.
[ -f Makefile ] || cd "$(dirname "$0")/.." || exit 1

# ok, bad, waitfor, run_docblock
. scripts/hostvm-lib.sh
journal() { journalctl -u dend --no-pager -o short-iso | grep -v 'Scheduled restart' | tail -80; }
finish() {
	if [ "$failed" -gt 0 ]; then
		echo "--- dend's journal"
		journal
		echo "HOSTVM-UPGRADE: $failed check(s) FAILED"
		exit 1
	fi
	echo "HOSTVM-UPGRADE: all checks passed"
	exit 0
}
die() {
	bad "$*"
	finish
}

shopt -s nullglob
new_debs=(dist/den_*_amd64.deb)
old_debs=(dist/prev/den_*_amd64.deb)
shopt -u nullglob
[ ${#new_debs[@]} -eq 1 ] || die "want one dist/den_*_amd64.deb, found ${#new_debs[@]}: run make dist on the host first"
[ ${#old_debs[@]} -eq 1 ] || die "want one dist/prev/den_*_amd64.deb, found ${#old_debs[@]}: run make dist-prev on the host first"
new_deb=$PWD/${new_debs[0]}
old_deb=$PWD/${old_debs[0]}
# Nothing of a build from source may stand in for the packages' files.
rm -rf /usr/local/lib/den
export DEBIAN_FRONTEND=noninteractive PATH=/usr/sbin:/usr/bin:/sbin:/bin

# apt_install DEB WHAT [APT-FLAGS...]: apt install DEB.
apt_install() {
	local deb=$1 what=$2
	shift 2
	if apt-get install -y -q "$@" "$deb" >/tmp/apt.log 2>&1; then
		ok "$what: apt install ./$(basename "$deb")"
	else
		tail -30 /tmp/apt.log
		die "$what: apt install ./$(basename "$deb")"
	fi
}
answers() { waitfor 600 "dend to answer after $1" den ls && ok "dend answers after $1"; }
state() { den inspect "$1" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }
want_state() { # NAME STATE WHEN
	local got
	got=$(state "$1")
	[ "$got" = "$2" ] && ok "$3: $1 is $2" || bad "$3: $1 is ${got:-unknown}, want $2"
}
count() { den exec run -- sh -c "kill -0 $counter && cat /tmp/count" 2>/dev/null; }
# counting WHEN: the counter's process runs on and its count grows past
# the last one read.
last=0
counting() {
	local a b
	a=$(count)
	sleep 3
	b=$(count)
	if [ -n "$a" ] && [ -n "$b" ] && [ "$a" -gt "$last" ] && [ "$b" -gt "$a" ]; then
		ok "$1: run's counter (pid $counter) counts on: $last, then $a, then $b"
		last=$b
	else
		bad "$1: run's counter (pid $counter) read '$a', then '$b', after $last: it stopped"
	fi
}
release() { dend --version | awk '{ print $2 }'; }

apt-get update -qq >/dev/null 2>&1
# The docs' blocks use sudo, which a minimal Debian lacks; apt asks
# before it installs dependencies, and a host's setting answers.
apt-get install -y -q sudo >/dev/null 2>&1 || die "apt-get install sudo"
echo 'APT::Get::Assume-Yes "true";' >/etc/apt/apt.conf.d/90hostvm-assume-yes
apt_install "$old_deb" "the previous release"
answers "installing the previous release"
old_release=$(release)
echo "previous release: $old_release"

den create run --image busybox >/dev/null && den create paused --image busybox >/dev/null &&
	den create hib --image busybox >/dev/null && ok "three sandboxes made under $old_release" || die "den create under $old_release"
counter=$(den exec run -- sh -c 'sh -c "i=0; while :; do i=\$((i+1)); echo \$i >/tmp/count; sleep 0.2; done" >/dev/null 2>&1 & echo $!')
paused_pid=$(den exec paused -- sh -c 'sleep 100000 >/dev/null 2>&1 & echo $!')
hib_pid=$(den exec hib -- sh -c 'sleep 100000 >/dev/null 2>&1 & echo $!')
den exec hib -- sh -c 'echo at-checkpoint >/root/f' &&
	den checkpoint hib --name old >/dev/null &&
	den exec hib -- sh -c 'echo after-checkpoint >/root/f' &&
	den pause paused >/dev/null && den hibernate hib >/dev/null &&
	ok "paused one, checkpointed and hibernated another" || die "pause, checkpoint or hibernate under $old_release"
counting "under $old_release"

# The upgrade: the package's postinst restarts dend; the host is not
# shutting down, so --on-stop auto leaves the sandboxes as they are.
run_docblock -r "./den_0.2.0_amd64.deb=$new_deb" docs/upgrades.md deb-upgrade || die "the upgrade, as docs/upgrades.md says"
answers "the upgrade"
run_docblock docs/upgrades.md upgrade-check
new_release=$(release)
[ "$new_release" != "$old_release" ] && ok "dend is $new_release now" || bad "dend --version still says $old_release"
if den version 2>&1 | grep -q warning; then bad "den version warns after the upgrade: $(den version 2>&1)"; else ok "den and dend are one release"; fi
if journalctl -u dend --no-pager | grep -q 'sandboxes keep running for the next dend (the host is not shutting down)'; then
	ok "the upgrade's stop left the sandboxes running (--on-stop auto: systemd is $(systemctl is-system-running), not stopping)"
else
	bad "the upgrade's stop did not say it left the sandboxes running"
fi
counting "after the upgrade"
want_state paused paused "after the upgrade"
want_state hib hibernated "after the upgrade"
den resume paused >/dev/null && [ "$(den exec paused -- pidof sleep)" = "$paused_pid" ] &&
	ok "paused resumes with its sleep ($paused_pid)" || bad "paused after the upgrade: $(den exec paused -- pidof sleep 2>&1)"
den resume hib >/dev/null && [ "$(den exec hib -- sh -c 'pidof sleep; cat /root/f')" = "$hib_pid
after-checkpoint" ] && ok "hib wakes with its sleep ($hib_pid) and files" || bad "hib after the upgrade: $(den exec hib -- sh -c 'pidof sleep; cat /root/f' 2>&1)"
den restore hib old >/dev/null && [ "$(den exec hib -- sh -c 'pidof sleep; cat /root/f')" = "$hib_pid
at-checkpoint" ] && ok "the checkpoint $old_release took restores" || bad "restoring hib's old checkpoint: $(den exec hib -- cat /root/f 2>&1)"
den create new --image busybox >/dev/null && [ "$(den exec new -- echo hi)" = hi ] &&
	ok "a sandbox made under $new_release" || bad "den create under $new_release"
den pause paused >/dev/null && den hibernate hib >/dev/null && ok "paused and hibernated again under $new_release" ||
	bad "pause or hibernate under $new_release"

# The rollback.
run_docblock -r "./den_0.1.0_amd64.deb=$old_deb" docs/upgrades.md deb-rollback || die "the rollback, as docs/upgrades.md says"
# The older dend may refuse the store (and systemd restarts it, in vain):
# wait without counting a failure, then see which.
for _ in $(seq 300); do
	den ls >/dev/null 2>&1 && break
	sleep 1
done
if den ls >/dev/null 2>&1; then
	ok "dend answers after the rollback"
	[ "$(release)" = "$old_release" ] && ok "dend is $old_release again" || bad "dend is $(release) after the rollback"
	counting "after the rollback"
	want_state paused paused "after the rollback"
	want_state hib hibernated "after the rollback"
	den resume paused >/dev/null && [ "$(den exec paused -- pidof sleep)" = "$paused_pid" ] &&
		ok "paused resumes under $old_release" || bad "paused after the rollback"
	den resume hib >/dev/null && [ "$(den exec hib -- pidof sleep)" = "$hib_pid" ] &&
		ok "hib wakes under $old_release" || bad "hib after the rollback"
	[ "$(den exec new -- echo hi)" = hi ] && ok "the sandbox $new_release made runs under $old_release" || bad "new after the rollback"
elif journalctl -u dend --no-pager | grep -q 'which this den does not know'; then
	ok "$old_release refuses the store $new_release migrated, and says so: $(journalctl -u dend --no-pager | grep -m1 -o 'the database records schema version.*')"
	apt_install "$new_deb" "forward again"
	answers "forward again"
	counting "forward again"
else
	bad "after the rollback dend neither answers nor says why"
fi
finish
