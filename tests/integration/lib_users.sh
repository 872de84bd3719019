# SPDX-License-Identifier: Apache-2.0
# Throwaway unprivileged users (and groups) for tests of one user against another or against a root daemon
# (source after lib.sh). Skips the test (77) where it cannot make users: not root, no useradd.
# new_user VAR: makes a user, removed when the test exits; $VAR is its name, ${VAR}_UID its uid.
# as_user NAME CMD...: runs CMD as that user (no supplementary groups), environment kept.
if [ "$(id -u)" != 0 ] || ! command -v useradd >/dev/null || ! command -v groupadd >/dev/null ||
  ! command -v setpriv >/dev/null; then
  echo "SKIP: needs root, useradd, groupadd and setpriv to make throwaway users"
  exit 77
fi
_GS_USERS=()
_GS_GROUPS=()
_gs_users_cleanup() {
  local rc=$? u
  jobs -p | xargs -r kill -9 2>/dev/null || true
  for u in "${_GS_USERS[@]}"; do
    pkill -9 -u "$u" 2>/dev/null || true
    for _ in 1 2 3 4 5; do userdel "$u" 2>/dev/null && break; sleep 0.2; done
  done
  for u in "${_GS_GROUPS[@]}"; do
    for _ in 1 2 3 4 5; do groupdel "$u" 2>/dev/null && break; sleep 0.2; done
  done
  (exit $rc)
  _gs_cleanup
}
trap _gs_users_cleanup EXIT
# Others must reach the test's socket and files.
chmod 0755 "$T"
# And what they run (a checkout under a 0700 dir is out of their reach): lib.sh.
reach_for_others
new_user() {
  local var=$1 name
  name="gst$$${#_GS_USERS[@]}$RANDOM"
  name=${name:0:30}
  # useradd takes /etc/passwd's lock: tests running side by side may find it held a moment.
  for _ in $(seq 50); do
    useradd --system --no-create-home --shell /usr/sbin/nologin "$name" 2>/dev/null && break
    sleep 0.1
  done
  id "$name" >/dev/null 2>&1 || fail "cannot create a test user"
  _GS_USERS+=("$name")
  printf -v "$var" '%s' "$name"
  printf -v "${var}_UID" '%s' "$(id -u "$name")"
}
# new_group VAR: a throwaway group; $VAR its name, ${VAR}_GID its gid.
new_group() {
  local var=$1 name
  name="gsg$$${#_GS_GROUPS[@]}$RANDOM"
  name=${name:0:30}
  for _ in $(seq 50); do
    groupadd --system "$name" 2>/dev/null && break
    sleep 0.1
  done
  getent group "$name" >/dev/null || fail "cannot create a test group"
  _GS_GROUPS+=("$name")
  printf -v "$var" '%s' "$name"
  printf -v "${var}_GID" '%s' "$(getent group "$name" | cut -d: -f3)"
}
# as_user_in NAME GID CMD...: as that user, with GID as a supplementary group.
as_user_in() {
  local u=$1 g=$2
  shift 2
  setpriv --reuid="$(id -u "$u")" --regid="$(id -g "$u")" --groups="$g" -- "$@"
}
as_user() {
  local u=$1
  shift
  setpriv --reuid="$(id -u "$u")" --regid="$(id -g "$u")" --clear-groups -- "$@"
}
