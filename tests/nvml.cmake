# SPDX-License-Identifier: Apache-2.0
# NVML as the hook meets it on real machines: process lists it cannot give (containers).
gslice_script_test(hook_nvml_pids hook_nvml_pids.sh TIMEOUT 60)
# nvidia-smi inside a slice (docs/nvml.md): its NVML calls, made by nvml_smi through the hook,
# answer for the slice (its processes by its pids, its memory, its share of the device, its GPUs).
if(TARGET gslice_sim_nvml)
  add_executable(nvml_smi progs/nvml_smi.c)
  target_include_directories(nvml_smi PRIVATE ${CMAKE_SOURCE_DIR}/src/common)
  target_link_libraries(nvml_smi PRIVATE gslice_sim_nvml)
  set_target_properties(nvml_smi PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  gslice_script_test(nvml_slices nvml_slices.sh TIMEOUT 120)
  # Samples, accounting, field values and lookups by serial or bus id answer for the slice too.
  add_executable(nvml_leaks progs/nvml_leaks.c)
  target_include_directories(nvml_leaks PRIVATE ${CMAKE_SOURCE_DIR}/src/common)
  target_link_libraries(nvml_leaks PRIVATE gslice_sim_nvml)
  set_target_properties(nvml_leaks PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  gslice_script_test(nvml_leaks nvml_leaks.sh TIMEOUT 120)
  # MIG, the lookup by UUID (R560), NVLink's far ends and the session lists; gsliced over MIG.
  add_executable(nvml_mig progs/nvml_mig.c)
  target_include_directories(nvml_mig PRIVATE ${CMAKE_SOURCE_DIR}/src/common)
  target_link_libraries(nvml_mig PRIVATE gslice_sim_nvml)
  set_target_properties(nvml_mig PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  gslice_script_test(nvml_mig nvml_mig.sh TIMEOUT 120)
  # NVML with CUDA unable to start (the sim's process slots full), the per-process samples' size
  # calls, the v1 NVLink far end, clock event reasons, CC memory, event sets, NULL outputs.
  add_executable(nvml_closed progs/nvml_closed.c)
  target_include_directories(nvml_closed PRIVATE ${CMAKE_SOURCE_DIR}/src/common ${CUDA_INCLUDE_DIR})
  target_link_libraries(nvml_closed PRIVATE gslice_sim_nvml gslice_sim_cuda)
  set_target_properties(nvml_closed PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  gslice_script_test(nvml_closed nvml_closed.sh TIMEOUT 120)
endif()
