# SPDX-License-Identifier: Apache-2.0
# The hook's benchmark: cuMemAlloc + cuMemFree pairs with and without libgslice.so.
if(TARGET gslice_sim_cuda)
  add_executable(hook_bench ${CMAKE_CURRENT_SOURCE_DIR}/hook_bench.c)
  target_include_directories(hook_bench PRIVATE ${CUDA_INCLUDE_DIR})
  target_link_libraries(hook_bench PRIVATE gslice_common gslice_sim_cuda)
  set_target_properties(hook_bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench
                        SKIP_BUILD_RPATH ON)
endif()
# The compute gate's cost per launch and per synchronize (bench/gate.sh runs it, issue 20.3).
if(TARGET gslice_sim_cuda)
  add_executable(gate_bench ${CMAKE_CURRENT_SOURCE_DIR}/gate_bench.c)
  target_include_directories(gate_bench PRIVATE ${CUDA_INCLUDE_DIR})
  target_link_libraries(gate_bench PRIVATE gslice_sim_cuda Threads::Threads)
  set_target_properties(gate_bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench
                        SKIP_BUILD_RPATH ON)
endif()
