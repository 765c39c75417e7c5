#!/usr/bin/env bash
# Live-systemd acceptance test (`make systest`): the single-file installer in a minimal Debian booted under its
# own systemd, as a user's machine runs it. Needs root (debootstrap, systemd-nspawn, nsenter) and the Debian
# package registry (once: the minimal root is kept in $RAGD_SYSTEST_CACHE and reused).
#
#   packaging/systest.sh                  the newest dist/ragd-installer-* (make dist first; make systest does)
#   RAGD_SYSTEST_KEEP=1 packaging/systest.sh   leave the machine running and its root in place, to look around
#
# The root: debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,libpam-systemd,acl,procps,sudo,python3
# (no X, no GL: what a server has). It is booted with systemd-nspawn -b --register=no --keep-unit (this machine's
# PID 1 is not systemd and it has no system bus: the flags make nspawn boot without them), and driven with nsenter
# into the booted machine's namespaces: systemctl, journalctl and the installed ragctl, as an administrator would.
# --private-network: the machine has its own loopback only (offline, and its agents' port 8739 is not the host's).
# Each run boots a fresh copy of the root and removes it (the machine stopped) at the end, whatever happened.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${VENV:-.venv}/bin/python
CACHE=${RAGD_SYSTEST_CACHE:-/var/tmp/ragd-systest}
BASE=$CACHE/bookworm-minbase
INCLUDE=systemd,systemd-sysv,dbus,libpam-systemd,acl,procps,sudo,python3
MACHINE=ragd-systest-$$
T0=$(date +%s)

fail() { echo "systest: FAILED: $*" >&2; exit 1; }
step() { echo "== +$(( $(date +%s) - T0 ))s $*"; }
[ "$(id -u)" = 0 ] || fail "needs root (debootstrap, systemd-nspawn, nsenter)"

INSTALLER=$(ls -t dist/ragd-installer-*-* 2>/dev/null | head -1)
[ -n "$INSTALLER" ] || fail "no dist/ragd-installer-*: run make dist (make systest does)"

step "tools: debootstrap, systemd-nspawn"
if ! command -v debootstrap >/dev/null || ! command -v systemd-nspawn >/dev/null; then
    apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap systemd-container; }
    apt_install >/dev/null || { apt-get update -qq && apt_install >/dev/null; }
fi

mirror() {  # the Debian mirror this machine's apt uses (deb822 or one-line sources)
    local m
    m=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
    [ -n "$m" ] || m=$(awk '$1 == "deb" && $2 !~ /security/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
    echo "${m:-http://deb.debian.org/debian}"
}
if [ ! -f "$BASE/.complete" ]; then
    step "minimal Debian root (once; kept in $BASE)"
    rm -rf "$BASE"
    mkdir -p "$CACHE"
    debootstrap --variant=minbase --include=$INCLUDE bookworm "$BASE" "$(mirror)" > "$CACHE/debootstrap.log" 2>&1 \
        || { tail -20 "$CACHE/debootstrap.log"; fail "debootstrap"; }
    touch "$BASE/.complete"
fi

RUN=$(mktemp -d "$CACHE/run.XXXXXX")
ROOT=$RUN/root
NSPAWN=
LEADER=
stop_machine() {
    if [ -n "$NSPAWN" ] && kill -0 "$NSPAWN" 2>/dev/null; then
        inside systemctl poweroff >/dev/null 2>&1 || true
        for _ in $(seq 100); do kill -0 "$NSPAWN" 2>/dev/null || break; sleep 0.2; done
        kill -KILL "$NSPAWN" 2>/dev/null || true
        wait "$NSPAWN" 2>/dev/null || true
    fi
    NSPAWN=
}
cleanup() {
    local code=$?
    if [ "${RAGD_SYSTEST_KEEP:-}" = 1 ]; then
        echo "systest: kept: machine (nspawn pid $NSPAWN, leader $LEADER), root $ROOT"
        return
    fi
    if [ $code -ne 0 ] && [ -n "$LEADER" ]; then
        echo "--- journal of ragd (last 60 lines) ---"
        inside journalctl -u ragd --no-pager -n 60 2>/dev/null || true
    fi
    stop_machine
    rm -rf "$RUN"
}
trap cleanup EXIT

inside() {  # run a command in the booted machine, as root, with a clean environment
    nsenter -t "$LEADER" -a -- /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 TERM=dumb SYSTEMD_PAGER= "$@"
}
until_ok() {  # seconds, what, command...: poll every 0.2 s
    local limit=$1 what=$2 t
    shift 2
    t=$(date +%s)
    until "$@" >/dev/null 2>&1; do
        if [ $(( $(date +%s) - t )) -ge "$limit" ]; then
            [ -n "${RAGD_QUIET_FAIL:-}" ] && return 1
            fail "$what (not within ${limit} s)"
        fi
        sleep 0.2
    done
}
cannot_boot() {  # the first boot failed: this machine does not let nspawn run a container, nothing of ragd ran yet
    if [ "$BOOTED" = 0 ]; then
        fail "$1: this machine cannot boot a container with systemd-nspawn (its output is above: e.g. no user,
    PID or mount namespaces, cgroups not writable, or no CAP_SYS_ADMIN in a container). That is the machine's
    limit, not a fault of ragd: run make systest on a VM or a host that allows systemd-nspawn -b"
    fi
    fail "$1"
}
BOOTED=0
# The machine's init: the child of systemd-nspawn in a PID namespace of its own. Not just its first child: nspawn
# forks a helper that clones the init and exits, and a reboot once caught that helper (every nsenter then failed).
leader() {
    local own p ns
    own=$(readlink "/proc/$NSPAWN/ns/pid" 2>/dev/null) || return 0
    for p in $(pgrep -P "$NSPAWN" || true); do
        ns=$(readlink "/proc/$p/ns/pid" 2>/dev/null) || continue
        [ "$ns" != "$own" ] && { echo "$p"; return 0; }
    done
}
boot() {
    systemd-nspawn -D "$ROOT" -b -M "$MACHINE" --register=no --keep-unit --console=passive --private-network \
        > "$RUN/nspawn.log" 2>&1 &
    NSPAWN=$!
    LEADER=
    for _ in $(seq 150); do
        LEADER=$(leader)
        [ -n "$LEADER" ] && break
        kill -0 "$NSPAWN" 2>/dev/null || { cat "$RUN/nspawn.log"; cannot_boot "systemd-nspawn exited"; }
        sleep 0.2
    done
    [ -n "$LEADER" ] || cannot_boot "no machine under systemd-nspawn"
    running() { local s; s=$(inside systemctl is-system-running 2>/dev/null || true); [ "$s" = running ] || [ "$s" = degraded ]; }
    if ! RAGD_QUIET_FAIL=1 until_ok 180 "the machine booted" running; then
        echo "state: $(inside systemctl is-system-running 2>&1 || true)"
        inside systemctl list-jobs --no-pager 2>&1 | tail -20 || true
        tail -20 "$RUN/nspawn.log"
        fail "the machine did not finish booting within 180 s"
    fi
    BOOTED=1
}

step "boot a fresh copy of the root"
cp -a "$BASE" "$ROOT"
cp "$INSTALLER" "$ROOT/usr/local/sbin/ragd-installer"
chmod 755 "$ROOT/usr/local/sbin/ragd-installer"
mkdir -p "$ROOT/srv/docs"
QUERIES=$("$PY" packaging/smoke/corpus.py "$ROOT/srv/docs")
boot
echo "booted: $(inside systemctl is-system-running || true), $(inside uname -r)"

# ---------------------------------------------------------------------------------------------------------------
step "system install"
inside ragd-installer install --system --roots /srv/docs | tee "$RUN/install.out"
inside setfacl -R -m u:ragd:rwX -m d:u:ragd:rwX /srv/docs  # as docs/operations.md says
inside systemctl restart ragd
until_ok 60 "ragd active" inside systemctl is-active ragd
out=$(inside systemd-analyze verify /etc/systemd/system/ragd.service 2>&1 || true)
[ -z "$out" ] || fail "systemd-analyze verify: $out"

step "every document found by search (OCR included)"
inside ragctl wait --timeout 600 || fail "ragctl wait"
inside ragctl status
while IFS=$'\t' read -r q f; do
    top=$(inside ragctl search "$q" -k 3 --json | "$PY" -c 'import json,os,sys; r=json.load(sys.stdin)["results"]; print(os.path.basename(r[0]["path"]) if r else "")')
    echo "  $q -> $top"
    [ "$top" = "$f" ] || fail "search '$q': expected $f first, got '${top}'"
done < <("$PY" -c 'import json,sys
for q, f in json.loads(sys.argv[1]).items(): print(f"{q}\t{f}")' "$QUERIES")

step "systemctl reload: a good config, then a bad one"
inside cp /etc/ragd/config.toml /root/config.good
printf '\n[watch]\nquiet = 0.2\n' | inside sh -c 'cat >> /etc/ragd/config.toml'
inside systemctl reload ragd || fail "systemctl reload with a good config"
printf '\nno_such_key = 1\n' | inside sh -c 'cat >> /etc/ragd/config.toml'
if inside systemctl reload ragd; then fail "systemctl reload returned 0 with an invalid config"; fi
inside cp /root/config.good /etc/ragd/config.toml
inside systemctl reload ragd || fail "systemctl reload after the config was repaired"

step "journalctl -p warning shows the agent's warnings and errors"
printf 'x' | inside sh -c 'cat > "/srv/docs/$(printf "bad \377 name.md")"'  # a name that is not UTF-8: a warning
# The journal is read whole before grep looks at it: `journalctl | grep -q` under pipefail fails whenever grep stops
# at an early match and journalctl's next write meets the closed pipe (SIGPIPE), which made these checks flaky.
journal() { inside journalctl --no-pager "$@"; }
journal_has() { local out; out=$(journal -u ragd -p "$1") || return 1; grep -q -- "$2" <<<"$out"; }  # priority, text
until_ok 30 "the warning in journalctl -p warning" journal_has warning 'not valid UTF-8'
journal_has err no_such_key || fail "the failed reload is not an error in journalctl -p err"
if journal_has warning 'INFO ragd'; then fail "info lines in journalctl -p warning"; fi

step "kill -9: restarted"
pid=$(inside systemctl show -p MainPID --value ragd)
inside kill -9 "$pid"
newpid() { local p; p=$(inside systemctl show -p MainPID --value ragd); [ "$p" != 0 ] && [ "$p" != "$pid" ] && inside systemctl is-active ragd; }
until_ok 30 "restarted after kill -9" newpid

step "kill -STOP: the watchdog restarts it, with every thread's stack in the journal"
pid=$(inside systemctl show -p MainPID --value ragd)
t=$(date +%s)
inside kill -STOP "$pid"
until_ok 120 "restarted by the watchdog" newpid
echo "restarted $(( $(date +%s) - t )) s after kill -STOP"
out=$(journal -u ragd) && grep -q "Failed with result 'watchdog'" <<<"$out" || fail "not the watchdog's restart"
stack() { local out; out=$(journal "_PID=$pid") || return 1; grep -q "(most recent call first)" <<<"$out"; }
until_ok 10 "the stopped agent's stack in the journal (faulthandler on the watchdog's SIGABRT)" stack

step "stop time"
t=$(date +%s%3N)
inside systemctl stop ragd
echo "stopped in $(( $(date +%s%3N) - t )) ms"
inside systemctl start ragd
until_ok 60 "ragd active again" inside systemctl is-active ragd

step "upgrade over itself keeps the config"
inside sh -c 'echo "# kept" >> /etc/ragd/config.toml'
inside ragd-installer install --system --roots /srv/docs > "$RUN/upgrade.out"
inside grep -q "# kept" /etc/ragd/config.toml || fail "the upgrade replaced the config"
until_ok 60 "ragd active after the upgrade" inside systemctl is-active ragd

step "installer: a --roots folder that does not exist is refused"
if inside ragd-installer install --system --roots /srv/no-such-folder > "$RUN/typo.out" 2>&1; then
    fail "the installer accepted --roots /srv/no-such-folder"
fi
grep -q "does not exist" "$RUN/typo.out" || fail "no clear message for a missing --roots folder: $(cat "$RUN/typo.out")"

# ---------------------------------------------------------------------------------------------------------------
step "user install from runuser (no login session, no user manager yet): says what to do"
inside useradd --create-home --shell /bin/bash tester
inside runuser -u tester -- mkdir -p /home/tester/notes
printf 'The narwhal tusk is a tooth that grows through the lip.\n' | inside runuser -u tester -- sh -c 'cat > /home/tester/notes/narwhal.md'
as_tester() { inside runuser -u tester -- env XDG_RUNTIME_DIR="/run/user/$TESTER_UID" "$@"; }
TESTER_UID=$(inside id -u tester)
inside runuser -u tester -- ragd-installer install --roots /home/tester/notes > "$RUN/user-install.out" 2>&1 \
    || { cat "$RUN/user-install.out"; fail "user install (no user manager)"; }
cat "$RUN/user-install.out"
grep -q "enable-linger tester" "$RUN/user-install.out" || fail "the user install did not say how to start the service"
if grep -q "^  systemctl --user" "$RUN/user-install.out"; then fail "it printed systemctl --user commands for a shell without a session"; fi

step "user install with linger: the user's manager runs the agent"
inside loginctl enable-linger tester
until_ok 60 "tester's systemd manager" inside test -d "/run/user/$TESTER_UID/systemd"
inside runuser -u tester -- ragd-installer install --roots /home/tester/notes | tee "$RUN/user-install2.out"
grep -q "ran: systemctl --user enable --now ragd: ok" "$RUN/user-install2.out" || fail "the user service was not started"
until_ok 60 "the user's ragd active" as_tester systemctl --user is-active ragd
out=$(as_tester systemd-analyze --user verify /home/tester/.config/systemd/user/ragd.service 2>&1 || true)
[ -z "$out" ] || fail "systemd-analyze --user verify: $out"
as_tester /home/tester/.local/bin/ragctl wait --timeout 300 || fail "the user's ragctl wait"
top=$(as_tester /home/tester/.local/bin/ragctl search "narwhal tooth" -k 1 --json | "$PY" -c 'import json,os,sys; r=json.load(sys.stdin)["results"]; print(os.path.basename(r[0]["path"]) if r else "")' 2>/dev/null || true)
[ "$top" = narwhal.md ] || fail "the user's search: expected narwhal.md, got '$top'"
echo "  narwhal tooth -> $top (user agent)"

step "reboot: both enabled, active again (the user's through linger)"
boot_id=$(inside cat /proc/sys/kernel/random/boot_id)
inside systemctl reboot || true
for _ in $(seq 300); do kill -0 "$NSPAWN" 2>/dev/null || break; sleep 0.2; done
kill -0 "$NSPAWN" 2>/dev/null && fail "the machine did not go down for the reboot within 60 s"
wait "$NSPAWN" 2>/dev/null || true
boot
[ "$(inside cat /proc/sys/kernel/random/boot_id)" != "$boot_id" ] || fail "the machine did not reboot"
until_ok 90 "ragd active after the reboot" inside systemctl is-active ragd
inside ragctl wait --timeout 300 || fail "ragctl wait after the reboot"
until_ok 90 "the user's ragd active after the reboot" as_tester systemctl --user is-active ragd

step "user uninstall --purge"
inside runuser -u tester -- ragd-installer uninstall --purge | tee "$RUN/user-uninstall.out"
if inside test -e /home/tester/.local/lib/ragd || inside test -e /home/tester/.local/share/ragd; then
    fail "the user's uninstall --purge left the program or the data"
fi
if as_tester systemctl --user is-active ragd; then fail "the user's ragd still runs after uninstall"; fi

step "uninstall, then uninstall --purge"
inside ragd-installer uninstall --system | tee "$RUN/uninstall.out"
inside test -f /etc/ragd/config.toml || fail "uninstall removed the config"
inside ragd-installer uninstall --system --purge || fail "uninstall --purge after uninstall"
if inside test -e /etc/ragd || inside test -e /var/lib/ragd; then fail "--purge left the config or the data"; fi
inside test -f /srv/docs/.rag/animals.pdf.ragjson || fail "the sidecars went with the uninstall"

step "systest passed in $(( $(date +%s) - T0 )) s"
