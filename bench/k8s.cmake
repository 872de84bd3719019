# SPDX-License-Identifier: Apache-2.0
# Kubernetes placement bench (issue 11): bench/k8s_place.sh runs it.
if(TARGET gslice_extender_core)
  add_executable(k8s_place ${CMAKE_CURRENT_SOURCE_DIR}/k8s_place.c)
  target_link_libraries(k8s_place PRIVATE gslice_extender_core)
  set_target_properties(k8s_place PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
endif()
