# SPDX-License-Identifier: Apache-2.0
# Kubernetes parts (issues 10 and 11): unit tests of src/k8s/, and the integration tests in
# tests/k8s/ that drive the real programs through stand-ins of the API server, kube-scheduler
# and kubelet (run with Debian's /usr/bin/python3; see tests/k8s/*.py).
if(TARGET gslice_k8s_common)
  gslice_unit_test(test_k8s_quantity SOURCES unit/test_k8s_quantity.c LIBS gslice_k8s_common)
  gslice_unit_test(test_k8s_annot SOURCES unit/test_k8s_annot.c LIBS gslice_k8s_common)
  gslice_unit_test(test_k8s_kube SOURCES unit/test_k8s_kube.c LIBS gslice_k8s_common)
  gslice_unit_test(test_k8s_sign SOURCES unit/test_k8s_sign.c LIBS gslice_k8s_common)
  gslice_unit_test(test_k8s_event SOURCES unit/test_k8s_event.c LIBS gslice_k8s_common)
  target_link_options(test_k8s_event PRIVATE -Wl,--wrap=kube_post -Wl,--wrap=kube_merge_patch)
  gslice_unit_test(test_k8s_jsonbound SOURCES unit/test_k8s_jsonbound.c LIBS gslice_k8s_common)
  gslice_unit_test(test_k8s_progmain SOURCES unit/test_k8s_progmain.c LIBS gslice_k8s_common)
  # The shared HTTP server on loopback, its peers 127.0.0.2.. as source addresses.
  gslice_unit_test(test_k8s_httpd SOURCES unit/test_k8s_httpd.c LIBS gslice_k8s_common)
  gslice_unit_test(test_k8s_dra_api SOURCES unit/test_k8s_dra_api.c
                   ${CMAKE_SOURCE_DIR}/src/k8s/node/dra_api.c LIBS gslice_k8s_common Threads::Threads)
  target_include_directories(test_k8s_dra_api PRIVATE ${CMAKE_SOURCE_DIR}/src/k8s/node)
  # dra_publish as gslice-node --mode dra calls it, driven by tests/k8s/dra_publish.sh.
  add_executable(k8s_dra_publish k8s/dra_publish.c ${CMAKE_SOURCE_DIR}/src/k8s/node/dra_api.c)
  target_include_directories(k8s_dra_publish PRIVATE ${CMAKE_SOURCE_DIR}/src/k8s/node)
  target_link_libraries(k8s_dra_publish PRIVATE gslice_k8s_common gslice_common Threads::Threads)
  set_target_properties(k8s_dra_publish PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  # A client of the API server stand-in, driven by tests/k8s/kube_client.sh.
  add_executable(k8s_kube_client k8s/kube_client.c)
  target_link_libraries(k8s_kube_client PRIVATE gslice_k8s_common)
  set_target_properties(k8s_kube_client PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
endif()

# gslice_k8s_test(NAME [TIMEOUT secs]): tests/k8s/NAME.sh, skipped (77) where it cannot run.
function(gslice_k8s_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "" ${ARGN})
  # 240 s: the slowest (node_slowapi_many) takes 70-116 s on 2 busy cores; a timeout is a
  # hang detector here, not a measure.
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 240)
  endif()
  add_test(NAME k8s.${name} COMMAND bash ${CMAKE_SOURCE_DIR}/tests/k8s/${name}.sh)
  set_tests_properties(k8s.${name} PROPERTIES LABELS k8s TIMEOUT ${T_TIMEOUT}
                       SKIP_RETURN_CODE 77 ENVIRONMENT "${GSLICE_TEST_ENV}")
endfunction()

file(GLOB GSLICE_K8S_SCRIPTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/k8s/*.sh)
foreach(script ${GSLICE_K8S_SCRIPTS})
  get_filename_component(name ${script} NAME_WE)
  if(NOT name MATCHES "^lib")
    gslice_k8s_test(${name})
  endif()
endforeach()
# Five rounds, four holding a claim's read 9.5 s and one stopping gsliced (tried up to 3 times):
# 183 s once on a host at load 24 with 8 s holds, near the default 240.
set_tests_properties(k8s.dra_unprep_race PROPERTIES TIMEOUT 420)

if(TARGET gslice_place)
  gslice_unit_test(test_k8s_place SOURCES unit/test_k8s_place.c LIBS gslice_place)
endif()

# tests/k8s/ext_*.py: gslice-extender end to end, through the API server and scheduler stand-ins.
if(TARGET gslice-extender)
  file(GLOB GSLICE_EXT_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/k8s/ext_*.py)
  foreach(script ${GSLICE_EXT_TESTS})
    get_filename_component(name ${script} NAME_WE)
    add_test(NAME k8s.${name} COMMAND /usr/bin/python3 ${script})
    set_tests_properties(k8s.${name} PROPERTIES LABELS k8s TIMEOUT 240 SKIP_RETURN_CODE 77
                         ENVIRONMENT "${GSLICE_TEST_ENV}")
  endforeach()
endif()
if(TARGET gslice_place)
  gslice_unit_test(test_k8s_podspec SOURCES unit/test_k8s_podspec.c LIBS gslice_place)
endif()
if(TARGET gslice_cluster)
  gslice_unit_test(test_k8s_cluster SOURCES unit/test_k8s_cluster.c LIBS gslice_cluster)
endif()
# The verbs on crafted bodies; the API server is kube_get and kube_post replaced at link time.
if(TARGET gslice_extender_core)
  gslice_unit_test(test_k8s_verbs SOURCES unit/test_k8s_verbs.c LIBS gslice_extender_core)
  target_link_options(test_k8s_verbs PRIVATE -Wl,--wrap=kube_get -Wl,--wrap=kube_post)
endif()
# gslice-webhook: the AdmissionReview codec on crafted bodies, and tests/k8s/webhook_*.py, the
# program over HTTPS.
if(TARGET gslice_webhook_review)
  gslice_unit_test(test_k8s_webhook SOURCES unit/test_k8s_webhook.c LIBS gslice_webhook_review)
endif()
if(TARGET gslice-webhook)
  file(GLOB GSLICE_WEBHOOK_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/k8s/webhook_*.py)
  foreach(script ${GSLICE_WEBHOOK_TESTS})
    get_filename_component(name ${script} NAME_WE)
    add_test(NAME k8s.${name} COMMAND /usr/bin/python3 ${script})
    set_tests_properties(k8s.${name} PROPERTIES LABELS k8s TIMEOUT 240 SKIP_RETURN_CODE 77
                         ENVIRONMENT "${GSLICE_TEST_ENV}")
  endforeach()
endif()
# The DRA stand-ins' own rules (tests/k8s/dra_alloc_test.py: the KEP-5075 allocator, the
# resource.k8s.io/v1 validation of the API server stand-in); Python only, no target needed.
add_test(NAME k8s.dra_alloc_test COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/k8s/dra_alloc_test.py)
set_tests_properties(k8s.dra_alloc_test PROPERTIES LABELS k8s TIMEOUT 60 SKIP_RETURN_CODE 77)
# The DRA kubelet stand-in against a minimal plugin of its own (registration, batches, wipe).
add_test(NAME k8s.dra_kubelet_test COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/k8s/dra_kubelet_test.py)
set_tests_properties(k8s.dra_kubelet_test PROPERTIES LABELS k8s TIMEOUT 120 SKIP_RETURN_CODE 77
                     ENVIRONMENT "${GSLICE_TEST_ENV}")
