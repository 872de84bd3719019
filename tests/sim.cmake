# SPDX-License-Identifier: Apache-2.0
# The simulated GPU's tests: client programs (built into ${CMAKE_BINARY_DIR}/tests),
# unit tests of its pure parts, and integration scripts running real processes on it.
set(SIM_TEST_OUT ${CMAKE_BINARY_DIR}/tests)

# One client source, two ways to reach the driver: linked with -lcuda (the sim's
# libcuda.so at build time) and dlopen + cuGetProcAddress, as libcudart does.
add_executable(sim_client_linked progs/sim_client.c)
target_include_directories(sim_client_linked PRIVATE ${CUDA_INCLUDE_DIR})
target_link_libraries(sim_client_linked PRIVATE gslice_sim_cuda Threads::Threads)
add_executable(sim_client_dlopen progs/sim_client.c)
target_include_directories(sim_client_dlopen PRIVATE ${CUDA_INCLUDE_DIR})
target_compile_definitions(sim_client_dlopen PRIVATE SIM_CLIENT_DLOPEN)
target_link_libraries(sim_client_dlopen PRIVATE ${CMAKE_DL_LIBS})
add_executable(sim_nvml progs/sim_nvml.c)
target_include_directories(sim_nvml PRIVATE ${CMAKE_SOURCE_DIR}/src/common)
target_link_libraries(sim_nvml PRIVATE gslice_sim_nvml)
# The stream capture rules, one subcommand per rule (integration/sim_capture.sh).
add_executable(sim_capture progs/sim_capture.c)
target_include_directories(sim_capture PRIVATE ${CUDA_INCLUDE_DIR})
target_link_libraries(sim_capture PRIVATE gslice_sim_cuda Threads::Threads)
set_target_properties(sim_client_linked sim_client_dlopen sim_nvml sim_capture PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${SIM_TEST_OUT})
# Scripts run the programs; make sure ctest never runs a stale build of them.
set(SIM_TEST_DEPS sim_client_linked sim_client_dlopen sim_nvml sim_capture gslice-sim
  gslice_sim_cuda gslice_sim_nvml)

gslice_unit_test(test_sim_config SOURCES unit/test_sim_config.c LIBS gslice_sim_state)
gslice_unit_test(test_sim_state SOURCES unit/test_sim_state.c LIBS gslice_sim_state)
gslice_unit_test(test_sim_procaddr SOURCES unit/test_sim_procaddr.c LIBS gslice_sim_driver)

file(GLOB SIM_SCRIPTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/integration/sim_*.sh)
foreach(script ${SIM_SCRIPTS})
  get_filename_component(name ${script} NAME_WE)
  gslice_script_test(${name} ${name}.sh TIMEOUT 60)
endforeach()
# Memsets, device-to-device copies and the legacy launches on the sim's clock (sim_work.sh).
add_executable(sim_work progs/sim_work.c)
target_include_directories(sim_work PRIVATE ${CUDA_INCLUDE_DIR})
target_link_libraries(sim_work PRIVATE gslice_sim_cuda)
set_target_properties(sim_work PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${SIM_TEST_OUT})
