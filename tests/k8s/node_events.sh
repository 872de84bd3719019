#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A refused container yields one Event on its pod, as `kubectl describe pod` lists them: core/v1,
# reason GSliceRefused, type Warning, involvedObject the pod (kind, namespace, name, uid), the
# why in the message, source gslice-node on node-a; the container started again (the same
# refusal) adds none.
source "$GSLICE_SRC/tests/k8s/lib.sh"
source "$GSLICE_SRC/tests/k8s/lib_node.sh"

node_up
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

# The same container started twice more, refused the same way: still one Event.
kl POST /pods/default/none/restart '{"container":"main"}' >/dev/null
kl POST /pods/default/none/restart '{"container":"main"}' >/dev/null
starts=$(jget "$(kl GET /pods/default/none)" "d['containers'][0]['starts']")
[ "$starts" -ge 3 ] || fail "the container started $starts times, want 3"
sleep 2
expect_eq "GSliceRefused Events after 3 starts" "$(refused)" 1
pass "3 starts with the same refusal: one Event"
