/* SPDX-License-Identifier: Apache-2.0 */
/* The kubelet API messages gslice-node sends and reads, as bytes on the wire: each field under
 * the number k8s.io/kubelet's api.proto gives it (tag = number << 3 | wire type), so that a
 * wrong number in src/k8s/proto/ fails here and not on a real kubelet. */
#include <string.h>

#include "deviceplugin.pb-c.h"
#include "podresources.pb-c.h"
#include "test.h"

static int same(const uint8_t *got, size_t got_len, const uint8_t *want, size_t want_len) {
  if (got_len != want_len || memcmp(got, want, want_len)) {
    fprintf(stderr, "bytes:");
    for (size_t i = 0; i < got_len; i++)
      fprintf(stderr, " %02x", got[i]);
    fprintf(stderr, "\n");
    return 0;
  }
  return 1;
}

static void test_register(void) {
  V1beta1__RegisterRequest r = V1BETA1__REGISTER_REQUEST__INIT;
  V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
  uint8_t buf[128];
  o.pre_start_required = 1;
  o.get_preferred_allocation_available = 1;
  r.version = "v1beta1";
  r.endpoint = "g.sock";
  r.resource_name = "gslice.io/gpu";
  r.options = &o;
  size_t n = v1beta1__register_request__pack(&r, buf);
  /* version = 1, endpoint = 2, resource_name = 3 (strings: wire type 2), options = 4 with
   * pre_start_required = 1 and get_preferred_allocation_available = 2 (varints). */
  static const uint8_t want[] = {0x0a, 7,   'v',  '1', 'b',  'e', 't',  'a',  '1', 0x12,
                                 6,    'g', '.',  's', 'o',  'c', 'k',  0x1a, 13,  'g',
                                 's',  'l', 'i',  'c', 'e',  '.', 'i',  'o',  '/', 'g',
                                 'p',  'u', 0x22, 4,   0x08, 1,   0x10, 1};
  CHECK(same(buf, n, want, sizeof(want)));
}

static void test_devices(void) {
  V1beta1__ListAndWatchResponse r = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
  V1beta1__Device d = V1BETA1__DEVICE__INIT, *dp = &d;
  uint8_t buf[64];
  d.id = "gpu0-1";
  d.health = "Healthy";
  r.n_devices = 1;
  r.devices = &dp;
  size_t n = v1beta1__list_and_watch_response__pack(&r, buf);
  /* devices = 1 { ID = 1, health = 2 } */
  static const uint8_t want[] = {0x0a, 17, 0x0a, 6,   'g', 'p', 'u', '0', '-', '1',
                                 0x12, 7,  'H',  'e', 'a', 'l', 't', 'h', 'y'};
  CHECK(same(buf, n, want, sizeof(want)));
}

static void test_allocate(void) {
  /* AllocateRequest: container_requests = 1 { devices_ids = 1 }, as the kubelet sends it. */
  static const uint8_t req[] = {0x0a, 8, 0x0a, 6, 'g', 'p', 'u', '0', '-', '3'};
  V1beta1__AllocateRequest *in = v1beta1__allocate_request__unpack(NULL, sizeof(req), req);
  CHECK(in && in->n_container_requests == 1 && in->container_requests[0]->n_devices_ids == 1 &&
        !strcmp(in->container_requests[0]->devices_ids[0], "gpu0-3"));
  if (in)
    v1beta1__allocate_request__free_unpacked(in, NULL);

  V1beta1__ContainerAllocateResponse c = V1BETA1__CONTAINER_ALLOCATE_RESPONSE__INIT;
  V1beta1__ContainerAllocateResponse__EnvsEntry e =
      V1BETA1__CONTAINER_ALLOCATE_RESPONSE__ENVS_ENTRY__INIT;
  V1beta1__ContainerAllocateResponse__EnvsEntry *ep = &e;
  V1beta1__Mount m = V1BETA1__MOUNT__INIT, *mp = &m;
  uint8_t buf[64];
  e.key = "K";
  e.value = "v";
  m.container_path = "/c";
  m.host_path = "/h";
  m.read_only = 1;
  c.n_envs = 1;
  c.envs = &ep;
  c.n_mounts = 1;
  c.mounts = &mp;
  size_t n = v1beta1__container_allocate_response__pack(&c, buf);
  /* envs = 1 (map entries: key = 1, value = 2), mounts = 2 { container_path = 1,
   * host_path = 2, read_only = 3 } */
  static const uint8_t want[] = {0x0a, 6, 0x0a, 1,   'K',  0x12, 1,   'v', 0x12, 10,
                                 0x0a, 2, '/',  'c', 0x12, 2,    '/', 'h', 0x18, 1};
  CHECK(same(buf, n, want, sizeof(want)));
}

static void test_prestart_preferred(void) {
  static const uint8_t ps[] = {0x0a, 2, 'a', 'b', 0x0a, 1, 'c'};
  V1beta1__PreStartContainerRequest *p =
      v1beta1__pre_start_container_request__unpack(NULL, sizeof(ps), ps);
  CHECK(p && p->n_devices_ids == 2 && !strcmp(p->devices_ids[1], "c"));
  if (p)
    v1beta1__pre_start_container_request__free_unpacked(p, NULL);
  /* container_requests = 1 { available_deviceIDs = 1, must_include_deviceIDs = 2,
   * allocation_size = 3 } */
  static const uint8_t pr[] = {0x0a, 8, 0x0a, 1, 'x', 0x12, 1, 'y', 0x18, 2};
  V1beta1__PreferredAllocationRequest *q =
      v1beta1__preferred_allocation_request__unpack(NULL, sizeof(pr), pr);
  CHECK(q && q->n_container_requests == 1);
  if (q) {
    V1beta1__ContainerPreferredAllocationRequest *c = q->container_requests[0];
    CHECK(c->n_available_deviceids == 1 && !strcmp(c->available_deviceids[0], "x"));
    CHECK(c->n_must_include_deviceids == 1 && !strcmp(c->must_include_deviceids[0], "y"));
    CHECK_EQ_INT(c->allocation_size, 2);
    v1beta1__preferred_allocation_request__free_unpacked(q, NULL);
  }
}

static void test_pod_resources(void) {
  /* pod_resources = 1 { name = 1 "p", namespace = 2 "n", containers = 3 { name = 1 "c",
   * devices = 2 { resource_name = 1 "r", device_ids = 2 "d" }, cpu_ids = 3 [5] (packed) } } */
  static const uint8_t b[] = {0x0a, 22,   0x0a, 1,    'p', 0x12, 1,    'n', 0x1a, 14,   0x0a, 1,
                              'c',  0x12, 6,    0x0a, 1,   'r',  0x12, 1,   'd',  0x1a, 1,    5};
  V1__ListPodResourcesResponse *l = v1__list_pod_resources_response__unpack(NULL, sizeof(b), b);
  CHECK(l && l->n_pod_resources == 1);
  if (!l)
    return;
  V1__PodResources *p = l->pod_resources[0];
  CHECK(!strcmp(p->name, "p") && !strcmp(p->namespace_, "n") && p->n_containers == 1);
  V1__ContainerResources *c = p->containers[0];
  CHECK(!strcmp(c->name, "c") && c->n_devices == 1 && c->n_cpu_ids == 1 && c->cpu_ids[0] == 5);
  CHECK(!strcmp(c->devices[0]->resource_name, "r") && c->devices[0]->n_device_ids == 1 &&
        !strcmp(c->devices[0]->device_ids[0], "d"));
  v1__list_pod_resources_response__free_unpacked(l, NULL);
  /* Garbage is refused, not half-read. */
  static const uint8_t bad[] = {0x0a, 50, 0x0a};
  CHECK(v1__list_pod_resources_response__unpack(NULL, sizeof(bad), bad) == NULL);
}

int main(void) {
  test_register();
  test_devices();
  test_allocate();
  test_prestart_preferred();
  test_pod_resources();
  return test_done();
}
