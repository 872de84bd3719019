# SPDX-License-Identifier: Apache-2.0
# The simulated GPU's own per-call cost (bench/sim_launch.sh runs it).
add_executable(sim_launch_bench sim_launch.c)
target_include_directories(sim_launch_bench PRIVATE ${CUDA_INCLUDE_DIR})
target_link_libraries(sim_launch_bench PRIVATE gslice_sim_cuda)
set_target_properties(sim_launch_bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
