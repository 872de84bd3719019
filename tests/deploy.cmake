# SPDX-License-Identifier: Apache-2.0
# deploy/ (issue 18): the kustomizations render and hold what an operator relies on
# (deploy.manifests), the dashboard and alerts use only series gsliced and gslice-extender
# serve (deploy.metrics), promtool takes the alerts and their unit tests (deploy.promtool), and
# the node guard's and the lease guard's CEL allow and deny what they should (deploy.node_guard,
# deploy.lease_guard, and deploy.resourceslice_guard for overlays/dra; all through the harness
# tests/deploy/celpolicy.py, itself checked by deploy.celpolicy; GSLICE_CEL_JS as for
# k8s.ext_forge_policy). Each skips (77) where its tool (kubectl, python3-yaml, promtool, a CEL
# evaluator) is missing.
add_test(NAME deploy.manifests COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/deploy/manifests.py)
add_test(NAME deploy.promtool COMMAND bash ${CMAKE_SOURCE_DIR}/tests/deploy/promtool.sh)
add_test(NAME deploy.node_guard COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/deploy/node_guard.py)
add_test(NAME deploy.lease_guard COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/deploy/lease_guard.py)
add_test(NAME deploy.resourceslice_guard
         COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/deploy/resourceslice_guard.py)
add_test(NAME deploy.celpolicy COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/deploy/celpolicy.py)
set(GSLICE_DEPLOY_TESTS deploy.manifests deploy.promtool deploy.node_guard deploy.lease_guard
    deploy.resourceslice_guard deploy.celpolicy)
# demo_spin (tests/ui.cmake) is made later in this directory; the script skips when it is not built.
if(TARGET gslice-extender)
  add_test(NAME deploy.metrics COMMAND bash ${CMAKE_SOURCE_DIR}/tests/deploy/metrics.sh)
  list(APPEND GSLICE_DEPLOY_TESTS deploy.metrics)
endif()
set_tests_properties(${GSLICE_DEPLOY_TESTS} PROPERTIES LABELS deploy TIMEOUT 120
                     SKIP_RETURN_CODE 77 ENVIRONMENT "${GSLICE_TEST_ENV}")
