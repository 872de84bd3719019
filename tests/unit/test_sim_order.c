/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the sim's device order: GSLICE_SIM_DEVICE_SMS parsed and refused, CUDA_DEVICE_ORDER
 * (FASTEST_FIRST by SMs, ties in bus order; PCI_BUS_ID bus order), and CUDA_VISIBLE_DEVICES'
 * indices read in that order while a UUID names its device in either. */
#include <errno.h>

#include "config.h"
#include "test.h"

static const char *sms_value;

static char *fake_getenv(const char *name) {
  return strcmp(name, "GSLICE_SIM_DEVICE_SMS") == 0 ? (char *)sms_value : NULL;
}

static int parse(const char *value, struct sim_config *c, char *err, size_t len) {
  sms_value = value;
  return sim_config_parse(fake_getenv, c, err, len);
}

static void test_parse(void) {
  struct sim_config c;
  char err[512];
  static const char *const bad[] = {"1",       "1:",   ":5",  "1:0",  "1:1025", "16:5",
                                    "1:5,1:6", "1:5,", "a:5", "1:5x", "1:-5"};

  CHECK_EQ_INT(parse(NULL, &c, err, sizeof(err)), 0);
  for (unsigned d = 0; d < SIM_MAX_DEVICES; d++)
    CHECK_EQ_U64(sim_config_sms(&c, d, 132), 132);
  CHECK_EQ_INT(parse("1:144,3:1", &c, err, sizeof(err)), 0);
  CHECK_EQ_U64(sim_config_sms(&c, 0, 132), 132);
  CHECK_EQ_U64(sim_config_sms(&c, 1, 132), 144);
  CHECK_EQ_U64(sim_config_sms(&c, 3, 132), 1);
  for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    err[0] = 0;
    CHECK_EQ_INT(parse(bad[i], &c, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "GSLICE_SIM_DEVICE_SMS") && strstr(err, "DEV:N"));
  }
}

static void test_order(void) {
  struct sim_config c;
  char err[512];
  unsigned order[SIM_MAX_DEVICES], vis[SIM_MAX_DEVICES];
  const char *const uuids[] = {"GPU-aaaa0000", "GPU-bbbb1111", "GPU-cccc2222", "GPU-dddd3333"};

  /* Identical GPUs: both orders are bus order. */
  CHECK_EQ_INT(parse(NULL, &c, err, sizeof(err)), 0);
  sim_device_order(&c, 4, 132, NULL, order);
  for (unsigned i = 0; i < 4; i++)
    CHECK_EQ_U64(order[i], i);
  /* GPUs 1 and 3 faster (as fast as each other), GPU 2 slowest. */
  CHECK_EQ_INT(parse("1:144,3:144,2:100", &c, err, sizeof(err)), 0);
  sim_device_order(&c, 4, 132, NULL, order);
  CHECK(order[0] == 1 && order[1] == 3 && order[2] == 0 && order[3] == 2);
  sim_device_order(&c, 4, 132, "FASTEST_FIRST", order);
  CHECK(order[0] == 1 && order[1] == 3 && order[2] == 0 && order[3] == 2);
  sim_device_order(&c, 4, 132, "bogus", order);
  CHECK(order[0] == 1 && order[1] == 3 && order[2] == 0 && order[3] == 2);
  sim_device_order(&c, 4, 132, "PCI_BUS_ID", order);
  CHECK(order[0] == 0 && order[1] == 1 && order[2] == 2 && order[3] == 3);

  /* CUDA_VISIBLE_DEVICES under FASTEST_FIRST: indices in its order, UUIDs as they are. */
  sim_device_order(&c, 4, 132, NULL, order);
  CHECK_EQ_INT(sim_visible_parse_order(NULL, 4, uuids, order, vis), 4);
  CHECK(vis[0] == 1 && vis[1] == 3 && vis[2] == 0 && vis[3] == 2);
  CHECK_EQ_INT(sim_visible_parse_order("1", 4, uuids, order, vis), 1);
  CHECK_EQ_U64(vis[0], 3);
  CHECK_EQ_INT(sim_visible_parse_order("2,0,9,1", 4, uuids, order, vis), 2);
  CHECK(vis[0] == 0 && vis[1] == 1);
  CHECK_EQ_INT(sim_visible_parse_order("GPU-aaaa0000,GPU-cccc", 4, uuids, order, vis), 2);
  CHECK(vis[0] == 0 && vis[1] == 2);
  CHECK_EQ_INT(sim_visible_parse_order("0,GPU-bbbb1111", 4, uuids, order, vis), 0); /* twice */
  /* Without an order (bus order), as sim_visible_parse. */
  CHECK_EQ_INT(sim_visible_parse_order("1", 4, uuids, NULL, vis), 1);
  CHECK_EQ_U64(vis[0], 1);
}

int main(void) {
  test_parse();
  test_order();
  return test_done();
}
