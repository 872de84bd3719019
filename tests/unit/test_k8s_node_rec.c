/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-node's records (record.c): the text on disk, read back, and what is refused. A record
 * decides which slice a restarting container gets, so a malformed one is ignored, never half
 * believed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "node.h"
#include "test.h"

/* The text the gslice-node before record.c wrote: records survive an upgrade both ways. */
static const char old_text[] = "slots=gpu0-1,gpu0-2\nnamespace=default\npod=p1\ncontainer=main\n"
                               "uid=u-1\nslice=7\nnonce=00000000deadbeef\npending=0\nsuperseded=1\n"
                               "name=k8s.1.default.p1.main\nstart=gpu0-1.17\nslice_dir=/var/lib/"
                               "gslice/slices/7\nmemory=0=1073741824\ndevices=GPU-a\n"
                               "compute_limit=50\n";

static void fill(struct node_rec *r) {
  memset(r, 0, sizeof(*r));
  snprintf(r->slots, sizeof(r->slots), "gpu0-1,gpu0-2");
  snprintf(r->ns, sizeof(r->ns), "default");
  snprintf(r->pod, sizeof(r->pod), "p1");
  snprintf(r->container, sizeof(r->container), "main");
  snprintf(r->pod_uid, sizeof(r->pod_uid), "u-1");
  r->slice_id = 7;
  r->nonce = 0xdeadbeef;
  r->superseded = true;
  snprintf(r->name, sizeof(r->name), "k8s.1.default.p1.main");
  snprintf(r->start, sizeof(r->start), "gpu0-1.17");
  snprintf(r->slice_dir, sizeof(r->slice_dir), "/var/lib/gslice/slices/7");
  snprintf(r->memory, sizeof(r->memory), "0=1073741824");
  snprintf(r->devices, sizeof(r->devices), "GPU-a");
  r->compute_limit = 50;
}

static int parse(const char *text, struct node_rec *r) {
  char *copy = strdup(text);
  memset(r, 0, sizeof(*r));
  int e = node_rec_parse(copy, r);
  free(copy);
  return e;
}

static void test_format(void) {
  struct node_rec r, back;
  char *text = NULL;
  size_t len = 0;

  fill(&r);
  CHECK_EQ_INT(node_rec_format(&r, &text, &len), 0);
  CHECK_STR(text, old_text);
  CHECK_EQ_U64(len, strlen(old_text));
  CHECK_EQ_INT(parse(text, &back), 0);
  CHECK(memcmp(&r, &back, sizeof(r)) == 0);
  free(text);
}

static void test_parse(void) {
  struct node_rec r;

  /* A record of an older gslice-node: only the required fields. */
  CHECK_EQ_INT(
      parse("slots=gpu1-0\nnamespace=ns\npod=p\ncontainer=c\nuid=\nslice=0\nnonce=0\n", &r), 0);
  CHECK_STR(r.slots, "gpu1-0");
  CHECK_EQ_INT(r.slice_id, 0);
  CHECK(!r.pending);
  /* A field of a newer one is skipped. */
  CHECK_EQ_INT(
      parse("slots=a\nnamespace=b\npod=c\ncontainer=d\nuid=e\nslice=1\nnonce=ff\nnew=1\n", &r), 0);
  CHECK_EQ_U64(r.nonce, 0xff);
}

static void test_refused(void) {
  struct node_rec r;
  char big[600];

  /* A required field missing (pod), once alone and once hidden by another given twice. */
  CHECK_EQ_INT(parse("slots=a\nnamespace=b\ncontainer=d\nuid=e\nslice=1\nnonce=1\n", &r), -EBADMSG);
  CHECK_EQ_INT(parse("slots=a\nslots=x\nnamespace=b\ncontainer=d\nuid=e\nslice=1\nnonce=1\n", &r),
               -EBADMSG);
  /* Not KEY=VALUE, a number that is not one, a slice id past 32 bits, a signed nonce. */
  CHECK_EQ_INT(
      parse("slots=a\nnamespace=b\npod=c\ncontainer=d\nuid=e\nslice=1\nnonce=1\njunk\n", &r),
      -EBADMSG);
  CHECK_EQ_INT(parse("slots=a\nnamespace=b\npod=c\ncontainer=d\nuid=e\nslice=1x\nnonce=1\n", &r),
               -EBADMSG);
  CHECK_EQ_INT(
      parse("slots=a\nnamespace=b\npod=c\ncontainer=d\nuid=e\nslice=4294967296\nnonce=1\n", &r),
      -EBADMSG);
  CHECK_EQ_INT(parse("slots=a\nnamespace=b\npod=c\ncontainer=d\nuid=e\nslice=1\nnonce=-1\n", &r),
               -EBADMSG);
  /* A value longer than its field. */
  memset(big, 'x', sizeof(big) - 1);
  big[sizeof(big) - 1] = 0;
  char text[1024];
  snprintf(text, sizeof(text),
           "slots=a\nnamespace=b\npod=c\ncontainer=d\nuid=e\nslice=1\nnonce=1\n"
           "memory=%s\n",
           big);
  CHECK_EQ_INT(parse(text, &r), -EBADMSG);
}

int main(void) {
  test_format();
  test_parse();
  test_refused();
  return test_done();
}
