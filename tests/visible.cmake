# SPDX-License-Identifier: Apache-2.0
# CUDA_VISIBLE_DEVICES under the hook: processes of one slice that number the GPUs
# differently share the physical device's budget (the region keys devices by UUID).
gslice_script_test(hook_visible hook_visible.sh TIMEOUT 60)
