# SPDX-License-Identifier: Apache-2.0
# A slice's GPUs in the hook: GPU UUIDs and their lists (uuid.h).
gslice_unit_test(test_uuid SOURCES unit/test_uuid.c)
if(TARGET gslice_sim_cuda)
  # Linked with -lcuda (the simulated driver's libcuda.so, as LD_LIBRARY_PATH finds it).
  add_executable(hook_gpus progs/hook_gpus.c)
  target_include_directories(hook_gpus PRIVATE ${CUDA_INCLUDE_DIR})
  target_link_libraries(hook_gpus PRIVATE gslice_sim_cuda Threads::Threads)
  set_target_properties(hook_gpus PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests
                        SKIP_BUILD_RPATH ON)
endif()
# The slice's GPUs by UUID (gslice run's CUDA_VISIBLE_DEVICES changed: G7), a 2D copy's descriptor
# flipped during the gate's wait, managed memory that reads as host memory.
gslice_script_test(hook_gpus hook_gpus.sh TIMEOUT 90)
