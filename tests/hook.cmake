# SPDX-License-Identifier: Apache-2.0
# The hook's tests: unit tests of its pure parts, client programs, integration scripts on the sim.
gslice_unit_test(test_region SOURCES unit/test_region.c)
gslice_unit_test(test_hook_allocs SOURCES unit/test_hook_allocs.c ${CMAKE_SOURCE_DIR}/src/hook/allocs.c)
target_include_directories(test_hook_allocs PRIVATE ${CMAKE_SOURCE_DIR}/src/hook)

# Client programs the integration scripts drive (binaries in ${CMAKE_BINARY_DIR}/tests).
foreach(prog hook_client hook_region hook_nvml hook_attack)
  add_executable(${prog} progs/${prog}.c)
  target_link_libraries(${prog} PRIVATE gslice_common Threads::Threads ${CMAKE_DL_LIBS})
  set_target_properties(${prog} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
endforeach()
target_include_directories(hook_client PRIVATE ${CUDA_INCLUDE_DIR})
target_include_directories(hook_nvml PRIVATE ${CMAKE_SOURCE_DIR}/src/common)
target_include_directories(hook_attack PRIVATE ${CMAKE_SOURCE_DIR}/src/common ${CUDA_INCLUDE_DIR})
if(TARGET gslice_sim_cuda)
  # The same client linked with -lcuda (against the simulated driver's libcuda.so).
  add_executable(hook_client_linked progs/hook_client.c)
  target_compile_definitions(hook_client_linked PRIVATE HOOK_CLIENT_LINKED=1)
  target_include_directories(hook_client_linked PRIVATE ${CUDA_INCLUDE_DIR})
  target_link_libraries(hook_client_linked PRIVATE gslice_common gslice_sim_cuda Threads::Threads
                        ${CMAKE_DL_LIBS})
  set_target_properties(hook_client_linked PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                        ${CMAKE_BINARY_DIR}/tests SKIP_BUILD_RPATH ON)
endif()

gslice_script_test(hook_paths hook_paths.sh TIMEOUT 180)
gslice_script_test(hook_race hook_race.sh TIMEOUT 120)
gslice_script_test(hook_fork hook_fork.sh TIMEOUT 120)
gslice_script_test(hook_view hook_view.sh TIMEOUT 60)
gslice_script_test(hook_kill hook_kill.sh TIMEOUT 120)
gslice_script_test(hook_config hook_config.sh TIMEOUT 120)
add_library(hook_next_lib SHARED progs/hook_next_lib.c)
target_link_libraries(hook_next_lib PRIVATE ${CMAKE_DL_LIBS})
set_target_properties(hook_next_lib PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
add_executable(hook_next progs/hook_next.c)
set_target_properties(hook_next PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
gslice_script_test(hook_contexts hook_contexts.sh TIMEOUT 60)
gslice_script_test(hook_devices hook_devices.sh TIMEOUT 60)
gslice_unit_test(test_hook_config SOURCES unit/test_hook_config.c ${CMAKE_SOURCE_DIR}/src/hook/config.c)
target_include_directories(test_hook_config PRIVATE ${CMAKE_SOURCE_DIR}/src/hook ${CUDA_INCLUDE_DIR})
target_compile_definitions(test_hook_config PRIVATE __CUDA_API_VERSION_INTERNAL=1)
gslice_script_test(hook_attack hook_attack.sh TIMEOUT 60)
# Holds a region's lock (through region_layout.h: the lock is not public API).
add_executable(hook_region_hold progs/hook_region_hold.c)
target_link_libraries(hook_region_hold PRIVATE gslice_common)
set_target_properties(hook_region_hold PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
gslice_script_test(hook_lockstop hook_lockstop.sh TIMEOUT 60)
gslice_script_test(hook_fulldisk hook_fulldisk.sh TIMEOUT 30)
gslice_script_test(hook_huge hook_huge.sh TIMEOUT 60)
# A Kubernetes container's slice.env, read by the hook before main (src/hook/k8s.c).
gslice_script_test(hook_k8s_env hook_k8s_env.sh TIMEOUT 60)
# tests/gpu/run.sh's exit status (its GPU parts stubbed, the sim for the device).
gslice_script_test(hook_gpu_status hook_gpu_status.sh TIMEOUT 180)
# libgslice.so's glibc symbol versions: at most 2.17, so it loads into older images.
gslice_script_test(hook_glibc hook_glibc.sh TIMEOUT 30)
if(TARGET gslice_sim_cuda)
  # Memsets, device-to-device copies and legacy launches as a slice's work (compute_work.sh).
  add_executable(compute_work progs/compute_work.c)
  target_include_directories(compute_work PRIVATE ${CUDA_INCLUDE_DIR})
  target_link_libraries(compute_work PRIVATE gslice_sim_cuda)
  set_target_properties(compute_work PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests
                        SKIP_BUILD_RPATH TRUE)
endif()
