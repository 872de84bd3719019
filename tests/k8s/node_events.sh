#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A refused container yields one Event on its pod, as `kubectl describe pod` lists them: core/v1,
# reason GSliceRefused, type Warning, involvedObject the pod (kind, namespace, name, uid), the
# why in the message, source gslice-node on node-a; the container started again (the same
# refusal) adds no Event but is counted into that one, as the kubelet's recorder does: ten
# starts, one Event with count 10 (one POST, then PATCHes of its count and lastTimestamp); the
# Events' series on gslice-node's /metrics (--health-listen) count the same as the API server.
source "$GSLICE_SRC/tests/k8s/lib.sh"
source "$GSLICE_SRC/tests/k8s/lib_node.sh"

HPORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
node_up '{"metadata":{"name":"node-a"}}' --health-listen "127.0.0.1:$HPORT"
# metric NAME [OUTCOME]: its value on gslice-node's /metrics.
metric() {
  local n=$1
  [ -z "${2:-}" ] || n="$1{outcome=\"$2\"}"
  curl -fsS "http://127.0.0.1:$HPORT/metrics" | awk -v n="$n" '$1 == n { print $2 }'
}
expect_eq "Events posted before any" "$(metric gslice_node_events_total posted)" 0
uid=$(npod --name none --no-assign main="$U0:1073741824:10")
kl POST /pods '{"namespace":"default","name":"none","containers":[{"name":"main","devices":1,"command":["sleep","600"]}]}' >/dev/null
refused() { jget "$(api GET /api/v1/namespaces/default/events)" "sum(e['reason'] == 'GSliceRefused' for e in d['items'])"; }
one() { [ "$(refused)" = 1 ]; }
until_secs 15 one
ev=$(api GET /api/v1/namespaces/default/events)
expect_eq "the Event" "$(jget "$ev" "[(e['type'], e['involvedObject']['kind'], e['involvedObject']['namespace'], e['involvedObject']['name'], e['involvedObject']['uid'], e['source']['component'], e['source']['host'], e['count']) for e in d['items'] if e['reason'] == 'GSliceRefused']")" \
  "[('Warning', 'Pod', 'default', 'none', '$uid', 'gslice-node', 'node-a', 1)]"
msg=$(jget "$ev" "[e['message'] for e in d['items'] if e['reason'] == 'GSliceRefused'][0]")
[[ "$msg" == *"container main gets no GPU: pod default/none has no gslice.io/assigned annotation"* ]] || fail "message: $msg"
pass "GSliceRefused on default/none: $msg"

# The same container started nine times more, refused the same way: still one Event, count 10.
for _ in $(seq 9); do kl POST /pods/default/none/restart '{"container":"main"}' >/dev/null; done
starts=$(jget "$(kl GET /pods/default/none)" "d['containers'][0]['starts']")
[ "$starts" -ge 10 ] || fail "the container started $starts times, want 10"
counted() { jget "$(api GET /api/v1/namespaces/default/events)" "[e['count'] for e in d['items'] if e['reason'] == 'GSliceRefused']"; }
ten() { [ "$(counted)" = "[10]" ]; }
for _ in $(seq 75); do ten && break; sleep 0.2; done
expect_eq "GSliceRefused Events' counts after 10 starts" "$(counted)" "[10]"
ev=$(api GET /api/v1/namespaces/default/events)
expect_eq "first before last" "$(jget "$ev" "[e['firstTimestamp'] <= e['lastTimestamp'] for e in d['items'] if e['reason'] == 'GSliceRefused']")" "[True]"
writes=$(api GET /_test/writes)
expect_eq "POSTs of Events" "$(jget "$writes" "d.get('POST /api/v1/namespaces/default/events', 0)")" 1
patches=$(jget "$writes" "sum(n for k, n in d.items() if k.startswith('PATCH /api/v1/namespaces/default/events/'))")
((patches >= 1 && patches <= 9)) || fail "$patches PATCHes of the Event, want 1..9"
pass "10 starts with the same refusal: one Event, count 10 ($patches PATCHes)"

# The same on /metrics: one posted, nine repeats, the PATCHes the API server saw, none dropped.
expect_eq "posted" "$(metric gslice_node_events_total posted)" 1
expect_eq "repeated" "$(metric gslice_node_events_total repeated)" 9
expect_eq "patched" "$(metric gslice_node_events_total patched)" "$patches"
expect_eq "queued" "$(metric gslice_node_events_queued_total)" 1
expect_eq "failed" "$(metric gslice_node_events_total failed)" 0
expect_eq "dropped" "$(metric gslice_node_events_total dropped_full)$(metric gslice_node_events_total dropped_rate)" 00
# The API server stand-in answers each request once: no kept connection was found out of step.
expect_eq "connections out of step" "$(metric gslice_node_api_connections_out_of_step_total)" 0
curl -fsS "http://127.0.0.1:$HPORT/metrics" | qgrep '^# TYPE gslice_node_events_total counter' ||
  fail "no TYPE line for gslice_node_events_total"
pass "/metrics: gslice_node_events_* as the API server saw them (1 posted, 9 repeated, $patches patched)"
