/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the sim's configuration table: defaults, sizes, kernel times, and bad
 * values refused with the variable and value named. */
#include <errno.h>

#include "config.h"
#include "test.h"

static const char *env[16][2];

static char *fake_getenv(const char *name) {
  for (int i = 0; i < 16 && env[i][0]; i++)
    if (strcmp(env[i][0], name) == 0)
      return (char *)env[i][1];
  return NULL;
}

static void set_env(const char *k, const char *v) {
  memset(env, 0, sizeof(env));
  env[0][0] = k;
  env[0][1] = v;
}

int main(void) {
  struct sim_config c;
  char err[512];

  memset(env, 0, sizeof(env));
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), 0);
  CHECK_EQ_U64(c.devices, 1);
  CHECK_EQ_U64(c.memory, 16ull << 30);
  CHECK_EQ_U64(c.context_memory, 256ull << 20);
  CHECK_EQ_U64(c.sms, 132);
  CHECK(strncmp(c.state_path, "/dev/shm/gslice-sim-", 20) == 0);
  CHECK_EQ_U64(c.explicit_mask, 0);

  set_env("GSLICE_SIM_MEMORY", "1GiB");
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), 0);
  CHECK_EQ_U64(c.memory, 1ull << 30);
  CHECK(c.explicit_mask & SIM_EXPLICIT_MEMORY);

  set_env("GSLICE_SIM_MEMORY", "lots");
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "GSLICE_SIM_MEMORY='lots'") != NULL);

  set_env("GSLICE_SIM_DEVICES", "0");
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "GSLICE_SIM_DEVICES='0'") != NULL);
  set_env("GSLICE_SIM_DEVICES", "17");
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), -EINVAL);
  set_env("GSLICE_SIM_DEVICES", "4x");
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), -EINVAL);
  set_env("GSLICE_SIM_DEVICES", "4");
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), 0);
  CHECK_EQ_U64(c.devices, 4);

  set_env("GSLICE_SIM_SMS", "-1");
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "GSLICE_SIM_SMS") != NULL);

  set_env("GSLICE_SIM_CONTEXT_MEMORY", "32GiB");
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "GSLICE_SIM_CONTEXT_MEMORY") != NULL);
  set_env("GSLICE_SIM_CONTEXT_MEMORY", "0");
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), 0);
  CHECK_EQ_U64(c.context_memory, 0);

  /* The driver's reservation: 0 by default, below the memory and leaving room for a context. */
  set_env("GSLICE_SIM_CONTEXT_MEMORY", "0");
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), 0);
  CHECK_EQ_U64(c.reserved, 0);
  set_env("GSLICE_SIM_RESERVED_MEMORY", "615MiB");
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), 0);
  CHECK_EQ_U64(c.reserved, 615ull << 20);
  CHECK(c.explicit_mask & SIM_EXPLICIT_RESERVED);
  set_env("GSLICE_SIM_RESERVED_MEMORY", "16GiB");
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "GSLICE_SIM_RESERVED_MEMORY (17179869184) must be below") != NULL);
  set_env("GSLICE_SIM_RESERVED_MEMORY", "16128MiB"); /* leaves 256 MiB: no room for a context */
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "GSLICE_SIM_CONTEXT_MEMORY") != NULL);

  /* NVML's process view: hidden (0/1) and a signed pid offset within pid_max. */
  set_env("GSLICE_SIM_NVML_HIDE_PIDS", "1");
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), 0);
  CHECK_EQ_U64(c.nvml_hide_pids, 1);
  CHECK_EQ_U64(c.explicit_mask, 0); /* a view, not the machine */
  set_env("GSLICE_SIM_NVML_HIDE_PIDS", "2");
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), -EINVAL);
  set_env("GSLICE_SIM_NVML_PID_OFFSET", "-4194304");
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), 0);
  CHECK(c.nvml_pid_offset == -4194304);
  set_env("GSLICE_SIM_NVML_PID_OFFSET", "77");
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), 0);
  CHECK(c.nvml_pid_offset == 77);
  const char *bad_offset[] = {"4194305", "-4194305", "", "-", "+3", "1x", "--1"};
  for (size_t i = 0; i < sizeof(bad_offset) / sizeof(bad_offset[0]); i++) {
    set_env("GSLICE_SIM_NVML_PID_OFFSET", bad_offset[i]);
    CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "GSLICE_SIM_NVML_PID_OFFSET=") != NULL);
  }

  set_env("GSLICE_SIM_STATE", "");
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), -EINVAL);
  set_env("GSLICE_SIM_STATE", "/tmp/x");
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), 0);
  CHECK_STR(c.state_path, "/tmp/x");

  set_env("GSLICE_SIM_KERNEL_US", "gemm=150,relu=3");
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), 0);
  CHECK_EQ_U64(c.nkernel_times, 2);
  CHECK_EQ_U64(sim_config_kernel_us(&c, "gemm"), 150);
  CHECK_EQ_U64(sim_config_kernel_us(&c, "relu"), 3);
  CHECK_EQ_U64(sim_config_kernel_us(&c, "other"), 0);
  const char *bad[] = {"gemm", "=5", "gemm=", "gemm=x", "gemm=5,", "a=1,,b=2"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    set_env("GSLICE_SIM_KERNEL_US", bad[i]);
    int r = sim_config_parse(fake_getenv, &c, err, sizeof(err));
    if (strcmp(bad[i], "gemm=5,") == 0)
      CHECK_EQ_INT(r, 0); /* a trailing comma is harmless */
    else
      CHECK_EQ_INT(r, -EINVAL);
  }

  /* NVML's MIG mode per device: DEV:N (N MIG devices) or DEV:pending, each device once. */
  set_env("GSLICE_SIM_NVML_MIG", "1:3,0:pending,2:0");
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), 0);
  CHECK_EQ_INT(c.nvml_mig_mode[0] * 100 + c.nvml_mig_mode[1] * 10 + c.nvml_mig_mode[2],
               SIM_MIG_PENDING * 100 + SIM_MIG_ON * 10 + SIM_MIG_ON);
  CHECK_EQ_INT(c.nvml_mig_devices[1] * 10 + c.nvml_mig_devices[2], 30);
  CHECK_EQ_INT(c.nvml_mig_mode[3], SIM_MIG_OFF);
  const char *bad_mig[] = {"1", "1:8", "16:1", "1:1,1:2", "1:x", ":1", "1:-1", "1:1,", "1:on"};
  for (size_t i = 0; i < sizeof(bad_mig) / sizeof(bad_mig[0]); i++) {
    set_env("GSLICE_SIM_NVML_MIG", bad_mig[i]);
    CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "GSLICE_SIM_NVML_MIG=") != NULL);
  }
  set_env("GSLICE_SIM_NVML_CHURN", "20");
  CHECK_EQ_INT(sim_config_parse(fake_getenv, &c, err, sizeof(err)), 0);
  CHECK_EQ_INT(c.nvml_churn, 20);

  /* CUDA_VISIBLE_DEVICES. */
  const char *uuids[] = {"GPU-11aa0000-0000-4000-8000-000000000000",
                         "GPU-11bb0000-0000-4000-8000-000000000000",
                         "GPU-22cc0000-0000-4000-8000-000000000000"};
  unsigned vis[SIM_MAX_DEVICES];
  CHECK_EQ_INT(sim_visible_parse(NULL, 3, uuids, vis), 3);
  CHECK_EQ_INT(vis[0] * 100 + vis[1] * 10 + vis[2], 12);
  CHECK_EQ_INT(sim_visible_parse("", 3, uuids, vis), 0);
  CHECK_EQ_INT(sim_visible_parse("2,0", 3, uuids, vis), 2);
  CHECK_EQ_INT(vis[0] * 10 + vis[1], 20);
  CHECK_EQ_INT(sim_visible_parse("0,2,-1,1", 3, uuids, vis), 2);
  CHECK_EQ_INT(sim_visible_parse("1,3,0", 3, uuids, vis), 1);
  CHECK_EQ_INT(sim_visible_parse(" 1 , 2gpu", 3, uuids, vis), 2); /* read as strtoul does */
  CHECK_EQ_INT(vis[0] * 10 + vis[1], 12);
  CHECK_EQ_INT(sim_visible_parse("1,,2", 3, uuids, vis), 1);
  CHECK_EQ_INT(sim_visible_parse("99999999999999999999", 3, uuids, vis), 0);
  CHECK_EQ_INT(sim_visible_parse("GPU-22", 3, uuids, vis), 1);
  CHECK_EQ_INT(vis[0], 2);
  CHECK_EQ_INT(sim_visible_parse("gpu-11BB", 3, uuids, vis), 1);
  CHECK_EQ_INT(vis[0], 1);
  CHECK_EQ_INT(sim_visible_parse("2,GPU-11", 3, uuids, vis), 1); /* ambiguous: ends the list */
  CHECK_EQ_INT(sim_visible_parse(uuids[0], 3, uuids, vis), 1);
  CHECK_EQ_INT(sim_visible_parse("MIG-11aa,0", 3, uuids, vis), 0);
  CHECK_EQ_INT(sim_visible_parse("0,1,0", 3, uuids, vis), 0); /* repeated: none */
  CHECK_EQ_INT(sim_visible_parse("0,GPU-11aa", 3, uuids, vis), 0);
  return test_done();
}
