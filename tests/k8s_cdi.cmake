# SPDX-License-Identifier: Apache-2.0
# gslice-node's CDI spec writer (src/k8s/node/cdi.c) alone: the specs' shape, the names CDI
# refuses, the cdiVersion chosen, the atomic write and its directory, the slice's edits. Its
# script tests are tests/k8s/node_cdi*.sh (registered by k8s.cmake).
if(TARGET gslice_node_pb)
  gslice_unit_test(test_k8s_cdi SOURCES unit/test_k8s_cdi.c
                   ${CMAKE_SOURCE_DIR}/src/k8s/node/cdi.c LIBS gslice_k8s_common)
  target_include_directories(test_k8s_cdi PRIVATE ${CMAKE_SOURCE_DIR}/src/k8s/node)
endif()
