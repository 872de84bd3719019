# gslice-node's unit tests (its script tests are tests/k8s/node_*.sh, registered by k8s.cmake).
if(TARGET gslice_node_pb)
  gslice_unit_test(test_k8s_node_pb SOURCES unit/test_k8s_node_pb.c LIBS gslice_node_pb)
endif()
