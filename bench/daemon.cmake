# SPDX-License-Identifier: Apache-2.0
# Compute benches (issue 4): launch overhead and token grant latency programs; the share
# accuracy table runs tests/progs/compute_spin. Binaries go next to the tests' programs.
if(TARGET gslice_sim_cuda)
  add_executable(compute_launch ${CMAKE_CURRENT_SOURCE_DIR}/compute_launch.c)
  target_include_directories(compute_launch PRIVATE ${CUDA_INCLUDE_DIR})
  target_link_libraries(compute_launch PRIVATE gslice_sim_cuda)
  set_target_properties(compute_launch PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                        ${CMAKE_BINARY_DIR}/tests SKIP_BUILD_RPATH TRUE)
endif()
add_executable(compute_grant ${CMAKE_CURRENT_SOURCE_DIR}/compute_grant.c)
target_link_libraries(compute_grant PRIVATE gslice_common Threads::Threads)
set_target_properties(compute_grant PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
# The device's idle time per token switch, read from the simulated GPU's busy ring.
if(TARGET gslice_sim_state)
  add_executable(compute_switch ${CMAKE_CURRENT_SOURCE_DIR}/compute_switch.c)
  target_link_libraries(compute_switch PRIVATE gslice_sim_state)
  set_target_properties(compute_switch PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
endif()
