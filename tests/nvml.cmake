# SPDX-License-Identifier: Apache-2.0
# NVML as the hook meets it on real machines: process lists it cannot give (containers).
gslice_script_test(hook_nvml_pids hook_nvml_pids.sh TIMEOUT 60)
