# SPDX-License-Identifier: Apache-2.0
# gslice-node's unit tests (its script tests are tests/k8s/node_*.sh, registered by k8s.cmake).
if(TARGET gslice_node_pb)
  gslice_unit_test(test_k8s_node_pb SOURCES unit/test_k8s_node_pb.c LIBS gslice_node_pb)
  gslice_unit_test(test_k8s_node_rec SOURCES unit/test_k8s_node_rec.c
                   ${CMAKE_SOURCE_DIR}/src/k8s/node/record.c LIBS gslice_k8s_common)
  target_include_directories(test_k8s_node_rec PRIVATE ${CMAKE_SOURCE_DIR}/src/k8s/node)
  gslice_unit_test(test_k8s_dra_node SOURCES unit/test_k8s_dra_node.c
                   ${CMAKE_SOURCE_DIR}/src/k8s/node/dra_rec.c ${CMAKE_SOURCE_DIR}/src/k8s/node/record.c
                   LIBS gslice_node_pb gslice_k8s_common)
  target_include_directories(test_k8s_dra_node PRIVATE ${CMAKE_SOURCE_DIR}/src/k8s/node)
endif()
# The end-to-end tests spin four to five workloads on the simulated GPUs at once: alone, so that
# neither they nor the compute tests beside them measure shares on a CPU starved by the other.
foreach(t k8s.node_e2e k8s.node_full)
  if(TEST ${t})
    set_tests_properties(${t} PROPERTIES RUN_SERIAL TRUE)
  endif()
endforeach()
