/* SPDX-License-Identifier: Apache-2.0 */
/* Unit test of the hook's allocation table: put/take, collisions, per-context drain, bounded size.
 */
#include "test.h"

#include <errno.h>

#include "allocs.h"

static void test_basic(void) {
  struct gs_allocs m = {0};
  struct gs_alloc a = {0x1000, GS_ALLOC_PTR, 1, 4096, (void *)1, 0, 0}, got;
  CHECK_EQ_INT(gs_allocs_take(&m, GS_ALLOC_PTR, 0x1000, &got), -ENOENT);
  CHECK_EQ_INT(gs_allocs_put(&m, &a), 0);
  CHECK_EQ_INT(gs_allocs_put(&m, &a), -EEXIST);
  /* The same key under another kind is another allocation (an array handle is not a pointer). */
  struct gs_alloc b = {0x1000, GS_ALLOC_ARRAY, 2, 10, NULL, 0, 0};
  CHECK_EQ_INT(gs_allocs_put(&m, &b), 0);
  CHECK_EQ_INT(gs_allocs_take(&m, GS_ALLOC_PTR, 0x1000, &got), 0);
  CHECK_EQ_U64(got.bytes, 4096);
  CHECK_EQ_INT(got.slot, 1);
  CHECK_EQ_INT(gs_allocs_take(&m, GS_ALLOC_PTR, 0x1000, &got), -ENOENT);
  CHECK_EQ_INT(gs_allocs_take(&m, GS_ALLOC_ARRAY, 0x1000, &got), 0);
  CHECK_EQ_U64(got.bytes, 10);
  CHECK_EQ_INT(m.n, 0);
  gs_allocs_clear(&m);
}

/* Many puts and takes in shuffled order: every entry found exactly once, the table no larger
 * than its peak needs (no tombstones). */
static void test_churn(void) {
  struct gs_allocs m = {0};
  enum { N = 20000 };
  uint64_t sum_put = 0, sum_taken = 0;
  for (uint64_t i = 0; i < N; i++) {
    struct gs_alloc a = {
        0x7f0000000000ull + i * 512, GS_ALLOC_PTR, (uint32_t)(i % 3), i, NULL, 0, 0};
    CHECK_EQ_INT(gs_allocs_put(&m, &a), 0);
    sum_put += i;
  }
  size_t cap = m.cap;
  for (int round = 0; round < 5; round++) {
    for (uint64_t i = round; i < N; i += 5) {
      struct gs_alloc got;
      CHECK_EQ_INT(gs_allocs_take(&m, GS_ALLOC_PTR, 0x7f0000000000ull + i * 512, &got), 0);
      CHECK_EQ_U64(got.bytes, i);
      sum_taken += got.bytes;
    }
    /* Refill half of what was taken, and take it again: the table must not grow. */
    for (uint64_t i = round; i < N; i += 10) {
      struct gs_alloc a = {0x100000000ull + i, GS_ALLOC_VMM, 0, 1, NULL, 0, 0}, got;
      CHECK_EQ_INT(gs_allocs_put(&m, &a), 0);
      CHECK_EQ_INT(gs_allocs_take(&m, GS_ALLOC_VMM, 0x100000000ull + i, &got), 0);
    }
  }
  CHECK_EQ_U64(sum_put, sum_taken);
  CHECK_EQ_INT(m.n, 0);
  CHECK_EQ_U64(m.cap, cap);
  gs_allocs_clear(&m);
}

static void test_ctx(void) {
  struct gs_allocs m = {0};
  void *c1 = (void *)0x111, *c2 = (void *)0x222;
  for (uint64_t i = 0; i < 1000; i++) {
    struct gs_alloc a = {i, GS_ALLOC_PTR, (uint32_t)(i % 2), 100, (i % 3) ? c1 : c2, 0, 0};
    CHECK_EQ_INT(gs_allocs_put(&m, &a), 0);
  }
  uint64_t bytes[4] = {0};
  size_t n = gs_allocs_take_ctx(&m, c1, bytes, 4);
  CHECK_EQ_INT(n, 666);
  CHECK_EQ_U64(bytes[0] + bytes[1], 66600);
  CHECK_EQ_INT(m.n, 334);
  for (uint64_t i = 0; i < 1000; i += 3) {
    struct gs_alloc got;
    CHECK_EQ_INT(gs_allocs_take(&m, GS_ALLOC_PTR, i, &got), 0);
  }
  CHECK_EQ_INT(m.n, 0);
  gs_allocs_clear(&m);
}

/* A pool's allocations (or a handle's mappings) re-keyed once the pool is gone: every entry of
 * that kind and ref, and only those, under the new kind and ref; their bytes summed without
 * wrapping. */
static void test_rekey(void) {
  struct gs_allocs m = {0};
  for (uint64_t i = 0; i < 300; i++) {
    struct gs_alloc a = {0x2000 + i, GS_ALLOC_POOL_PTR, 0, 10, NULL, i % 3 ? 0xA : 0xB, 0};
    CHECK_EQ_INT(gs_allocs_put(&m, &a), 0);
  }
  struct gs_alloc other = {0x2000, GS_ALLOC_MAP, 0, 7, NULL, 0xA, 0}, got;
  CHECK_EQ_INT(gs_allocs_put(&m, &other), 0);
  uint64_t bytes = 0;
  CHECK_EQ_INT(gs_allocs_rekey(&m, GS_ALLOC_POOL_PTR, 0xA, GS_ALLOC_POOL_GONE_PTR, 42, &bytes),
               200);
  CHECK_EQ_U64(bytes, 2000);
  CHECK_EQ_INT(m.n, 301);
  for (uint64_t i = 0; i < 300; i++) {
    uint32_t kind = i % 3 ? GS_ALLOC_POOL_GONE_PTR : GS_ALLOC_POOL_PTR;
    CHECK_EQ_INT(gs_allocs_take(&m, kind, 0x2000 + i, &got), 0);
    CHECK_EQ_U64(got.ref, i % 3 ? 42 : 0xB);
    CHECK_EQ_U64(got.bytes, 10);
  }
  CHECK_EQ_INT(gs_allocs_take(&m, GS_ALLOC_MAP, 0x2000, &got), 0);
  CHECK_EQ_U64(got.ref, 0xA);
  /* Nothing of that kind and ref: none, and no bytes asked for. */
  CHECK_EQ_INT(gs_allocs_rekey(&m, GS_ALLOC_MAP, 0xA, GS_ALLOC_MAP_GONE, 1, NULL), 0);
  struct gs_alloc big = {1, GS_ALLOC_MAP, 0, UINT64_MAX - 1, NULL, 5, 0};
  struct gs_alloc big2 = {2, GS_ALLOC_MAP, 0, 5, NULL, 5, 0};
  CHECK_EQ_INT(gs_allocs_put(&m, &big), 0);
  CHECK_EQ_INT(gs_allocs_put(&m, &big2), 0);
  bytes = 0;
  CHECK_EQ_INT(gs_allocs_rekey(&m, GS_ALLOC_MAP, 5, GS_ALLOC_MAP_GONE, 6, &bytes), 2);
  CHECK_EQ_U64(bytes, UINT64_MAX);
  gs_allocs_clear(&m);
}

int main(void) {
  test_basic();
  test_churn();
  test_ctx();
  test_rekey();
  return test_done();
}
