# SPDX-License-Identifier: Apache-2.0
# CUDA_VISIBLE_DEVICES under the hook: processes of one slice that number the GPUs
# differently share the physical device's budget (the region keys devices by UUID).
gslice_script_test(hook_visible hook_visible.sh TIMEOUT 60)
# gslice run's CUDA_VISIBLE_DEVICES: the slice's GPUs by UUID, where CUDA's order is not NVML's.
gslice_script_test(run_visible run_visible.sh TIMEOUT 60)
# The sim's CUDA order (GSLICE_SIM_DEVICE_SMS, CUDA_DEVICE_ORDER) and its indices in CUDA_VISIBLE_DEVICES.
gslice_unit_test(test_sim_order SOURCES unit/test_sim_order.c LIBS gslice_sim_state)
