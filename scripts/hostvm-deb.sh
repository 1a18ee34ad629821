#!/usr/bin/env bash
# The Debian package on a fresh host: after `make dist`,
# `../shared/hostvm/run-in-vm scripts/hostvm-deb.sh` boots Debian 12 with
# systemd under qemu and runs this script in it as root, from a copy of
# the checkout (with its dist/) at /root/den.
#
# `apt install ./den_*_amd64.deb` in dist/, and nothing else (docs/install.md's
# block deb-install, run by name: run_docblock): dend is enabled
# and running under systemd, `den create x` and `den exec` work, the man
# pages and completions are in place; a reinstall (what an upgrade does)
# keeps an edited /etc/den/dend.env and the running sandbox; `apt remove`
# stops dend and leaves /var/lib/den, and so does a purge.
#
# Every check prints "ok:" or "FAIL:"; the script exits non-zero if any
# failed, with dend's journal. qemu emulates the CPU: waits are long, and
# nothing here is a time.
set -uo pipefail
# run-in-vm runs a copy of this script from the checkout's root, /root/den.
[ -f Makefile ] || cd "$(dirname "$0")/.." || exit 1

# ok, bad, waitfor, run_docblock
. scripts/hostvm-lib.sh
journal() { journalctl -u dend --no-pager -o short-iso | tail -80; }
finish() {
	if [ "$failed" -gt 0 ]; then
		echo "--- dend's journal"
		journal
		echo "HOSTVM-DEB: $failed check(s) FAILED"
		exit 1
	fi
	echo "HOSTVM-DEB: all checks passed"
	exit 0
}
die() {
	bad "$*"
	finish
}

shopt -s nullglob
debs=(dist/den_*_amd64.deb)
shopt -u nullglob
[ ${#debs[@]} -eq 1 ] && [ -f "${debs[0]}" ] || die "want one dist/den_*_amd64.deb, found ${#debs[@]}: run make dist first (once)"
deb=$PWD/${debs[0]}
# Nothing of a build from source may stand in for the package's files.
rm -rf /usr/local/lib/den
export DEBIAN_FRONTEND=noninteractive PATH=/usr/sbin:/usr/bin:/sbin:/bin

apt-get update -qq >/dev/null 2>&1
# apt asks before it installs the dependencies; a host's setting answers.
echo 'APT::Get::Assume-Yes "true";' >/etc/apt/apt.conf.d/90hostvm-assume-yes
# docs/install.md's block, from the checkout's root; its make dist ran on
# the host (dist/ came with the checkout): compiling under qemu would
# take an hour.
run_docblock -r 'make dist =ls dist ' docs/install.md deb-install || die "apt install ./$(basename "$deb"), as docs/install.md says"
[ "$(command -v dend)" = /usr/bin/dend ] && [ "$(command -v den)" = /usr/bin/den ] && ok "dend and den in /usr/bin" || bad "dend and den are not in /usr/bin"
[ -x /usr/lib/den/runsc ] && [ -x /usr/lib/den/den-init ] && ok "runsc and den-init in /usr/lib/den" || bad "runsc or den-init missing from /usr/lib/den"
[ "$(systemctl is-enabled dend 2>&1)" = enabled ] && ok "dend.service is enabled" || bad "dend.service is $(systemctl is-enabled dend 2>&1), want enabled"
waitfor 300 "dend.service to be active" systemctl is-active --quiet dend && ok "dend.service is active"
waitfor 600 "dend to answer" den ls && ok "den ls answers"
release=$(dend --version | awk '{ print $2 }')
if den version 2>&1 | grep -q -- "$release" && ! den version 2>&1 | grep -q warning; then
	ok "den version names the release, $release, for both"
else
	bad "den version does not name $release for den and dend: $(den version 2>&1)"
fi
for p in /usr/share/man/man8/dend.8.gz /usr/share/man/man1/den.1.gz /usr/share/man/man1/den-create.1.gz \
	/usr/share/bash-completion/completions/den /usr/share/zsh/vendor-completions/_den /usr/share/fish/vendor_completions.d/den.fish; do
	[ -s "$p" ] && ok "$p" || bad "$p is missing"
done
zcat /usr/share/man/man8/dend.8.gz | grep -q -- '\\-\\-data\\-dir' && ok "dend(8) names --data-dir" || bad "dend(8) does not name --data-dir"
[ "$(stat -c %a /etc/den/dend.env)" = 600 ] && grep -qx 'DEN_RUNSC=/usr/lib/den/runsc' /etc/den/dend.env &&
	ok "/etc/den/dend.env, mode 600, names the package's runsc" || bad "/etc/den/dend.env: $(stat -c %a /etc/den/dend.env 2>&1) $(grep RUNSC /etc/den/dend.env 2>&1)"

if den create x >/tmp/create.log 2>&1; then
	ok "den create x"
else
	cat /tmp/create.log
	bad "den create x"
	echo "--- dend's journal around the create"
	journalctl -u dend --no-pager -o short-iso | grep -v 'Scheduled restart' | tail -60
fi
[ "$(den exec x -- echo hello 2>&1)" = hello ] && ok "den exec x -- echo hello" || bad "den exec x: $(den exec x -- echo hello 2>&1)"

# A reinstall runs the maintainer scripts as an upgrade does: dend is
# restarted, the sandbox keeps running, the edited dend.env is kept.
echo '# kept by the package' >>/etc/den/dend.env
if apt-get install -y -q --reinstall "$deb" >/tmp/apt-reinstall.log 2>&1; then
	ok "apt install --reinstall"
else
	tail -30 /tmp/apt-reinstall.log
	bad "apt install --reinstall"
fi
grep -qx '# kept by the package' /etc/den/dend.env && ok "the edited dend.env is kept" || bad "the reinstall overwrote /etc/den/dend.env"
if waitfor 600 "dend to answer after the reinstall" den ls; then
	ok "dend answers after the reinstall"
else
	echo "--- dend's journal after the reinstall (first lines), and the cgroups"
	journalctl -u dend --no-pager -o short-iso --since "-12min" | grep -v 'Scheduled restart' | head -40
	ls -d /sys/fs/cgroup/system.slice /sys/fs/cgroup/system.slice/dend.service /sys/fs/cgroup/den 2>&1
fi
[ "$(den exec x -- echo again 2>&1)" = again ] && ok "sandbox x runs on after the reinstall" || bad "sandbox x after the reinstall: $(den exec x -- echo again 2>&1)"

if apt-get remove -y -q den >/tmp/apt-remove.log 2>&1; then
	ok "apt remove den"
else
	tail -30 /tmp/apt-remove.log
	bad "apt remove den"
fi
systemctl is-active --quiet dend && bad "dend still runs after apt remove" || ok "apt remove stopped dend"
[ ! -e /usr/bin/dend ] && ok "apt remove took /usr/bin/dend" || bad "/usr/bin/dend is still there"
[ -d /var/lib/den ] && [ -n "$(ls -A /var/lib/den)" ] && ok "/var/lib/den is kept" || bad "apt remove touched /var/lib/den"
[ -f /etc/den/dend.env ] && ok "apt remove keeps /etc/den/dend.env" || bad "apt remove took /etc/den/dend.env"
apt-get purge -y -q den >/tmp/apt-purge.log 2>&1 && ok "apt purge den" || bad "apt purge den: $(tail -5 /tmp/apt-purge.log)"
[ -d /var/lib/den ] && ok "/var/lib/den is kept after a purge" || bad "apt purge took /var/lib/den"
finish
