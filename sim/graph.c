/* SPDX-License-Identifier: Apache-2.0 */
/* Graphs: what stream capture records (the capture rules are capture.c's), graphs built node
 * by node, instantiation and its flags, upload, and replay of an executable graph as a chain
 * on the launch stream (kernels through launch.c). */
#include "driver.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct sim_graph {
  uint32_t magic;
  struct sim_node *nodes;
  size_t n, cap;
  struct sim_graph *next_free;
  /* Executable graphs: the instantiation flags, and where the last launch ended (each launch
   * is ordered behind the previous one, whatever the stream). */
  unsigned long long flags;
  struct sim_ctx *tail_ctx;
  struct sim_mark tail;
};

int sim_graph_add_node(struct sim_graph *g, const struct sim_node *node) {
  if (g->n == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 16;
    struct sim_node *n = realloc(g->nodes, cap * sizeof(*n));
    if (!n)
      return -ENOMEM;
    g->nodes = n;
    g->cap = cap;
  }
  g->nodes[g->n++] = *node;
  return 0;
}

size_t sim_graph_nodes(const struct sim_graph *g) {
  return g->n;
}

/* Destroyed graphs and executable graphs are recycled, never freed, so destroying one
 * twice is an error (CUDA_ERROR_INVALID_VALUE), not a double free. */
static pthread_mutex_t graph_free_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sim_graph *graph_free_list;

struct sim_graph *sim_graph_new(void) {
  pthread_mutex_lock(&graph_free_mu);
  struct sim_graph *g = graph_free_list;
  if (g)
    graph_free_list = g->next_free;
  pthread_mutex_unlock(&graph_free_mu);
  if (!g && !(g = malloc(sizeof(*g))))
    return NULL;
  memset(g, 0, sizeof(*g));
  g->magic = SIM_GRAPH_MAGIC;
  return g;
}

static struct sim_graph *graph_arg(void *h, uint32_t magic) {
  struct sim_graph *g = h;
  return g && g->magic == magic ? g : NULL;
}

SIM_API CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags) {
  SIM_REQUIRE_INIT();
  if (!phGraph)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_graph *g = sim_graph_new();
  if (!g)
    return CUDA_ERROR_OUT_OF_MEMORY;
  *phGraph = (CUgraph)g;
  return CUDA_SUCCESS;
}

void sim_graph_free(struct sim_graph *g) {
  g->magic = 0;
  free(g->nodes);
  g->nodes = NULL;
  g->n = g->cap = 0;
  pthread_mutex_lock(&graph_free_mu);
  g->next_free = graph_free_list;
  graph_free_list = g;
  pthread_mutex_unlock(&graph_free_mu);
}

SIM_API CUresult cuGraphDestroy(CUgraph hGraph) {
  SIM_REQUIRE_INIT();
  struct sim_graph *g = graph_arg(hGraph, SIM_GRAPH_MAGIC);
  if (!g)
    return CUDA_ERROR_INVALID_VALUE;
  sim_graph_free(g);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                         const CUgraphNode *dependencies, size_t numDependencies,
                                         const CUDA_KERNEL_NODE_PARAMS *nodeParams) {
  SIM_REQUIRE_INIT();
  struct sim_graph *g = graph_arg(hGraph, SIM_GRAPH_MAGIC);
  if (!g || !phGraphNode || !nodeParams)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_func *f =
      (struct sim_func *)(nodeParams->func ? (void *)nodeParams->func : (void *)nodeParams->kern);
  if (!f || f->magic != SIM_FUNC_MAGIC)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_node node = {.type = SIM_NODE_KERNEL,
                          .dur = sim_kernel_ns(f, nodeParams->kernelParams, nodeParams->extra)};
  if (sim_graph_add_node(g, &node) < 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  /* Nodes are run as a chain in the order added: with one kernel at a time on the
   * device, any order the edges allow takes the same device time. */
  *phGraphNode = (CUgraphNode)(uintptr_t)g->n;
  return CUDA_SUCCESS;
}

#define INSTANTIATE_FLAGS                                                                          \
  (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |          \
   CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)

/* Whether g may be instantiated with flags (cuda.h, cuGraphInstantiate): known flags only;
 * device launch not with auto-free, and only of a graph that is not empty and holds kernel,
 * memcpy and memset nodes alone. */
static CUgraphInstantiateResult instantiate_check(const struct sim_graph *g,
                                                  unsigned long long flags) {
  if (flags & ~(unsigned long long)INSTANTIATE_FLAGS)
    return CUDA_GRAPH_INSTANTIATE_ERROR;
  if (!(flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH))
    return CUDA_GRAPH_INSTANTIATE_SUCCESS;
  if ((flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) || g->n == 0)
    return CUDA_GRAPH_INSTANTIATE_ERROR;
  for (size_t i = 0; i < g->n; i++)
    if (g->nodes[i].type != SIM_NODE_KERNEL && g->nodes[i].type != SIM_NODE_COPY &&
        g->nodes[i].type != SIM_NODE_MEMSET)
      return CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED;
  return CUDA_GRAPH_INSTANTIATE_SUCCESS;
}

static CUresult instantiate(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags,
                            CUgraphInstantiateResult *result) {
  SIM_REQUIRE_INIT();
  struct sim_graph *g = graph_arg(hGraph, SIM_GRAPH_MAGIC);
  *result = CUDA_GRAPH_INSTANTIATE_ERROR;
  if (!g || !phGraphExec)
    return CUDA_ERROR_INVALID_VALUE;
  if ((*result = instantiate_check(g, flags)) != CUDA_GRAPH_INSTANTIATE_SUCCESS)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_graph *x = sim_graph_new();
  if (!x)
    return CUDA_ERROR_OUT_OF_MEMORY;
  x->magic = SIM_EXEC_MAGIC;
  /* cuGraphExecGetFlags: "CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD will not be returned". */
  x->flags = flags & ~(unsigned long long)CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
  for (size_t i = 0; i < g->n; i++)
    if (sim_graph_add_node(x, &g->nodes[i]) < 0) {
      sim_graph_free(x);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  *phGraphExec = (CUgraphExec)x;
  return CUDA_SUCCESS;
}

/* CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD is "only supported by cuGraphInstantiateWithParams". */
SIM_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                             unsigned long long flags) {
  CUgraphInstantiateResult result;
  if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)
    return CUDA_ERROR_INVALID_VALUE;
  return instantiate(phGraphExec, hGraph, flags, &result);
}

SIM_API CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
                                       CUgraphNode *phErrorNode, char *logBuffer,
                                       size_t bufferSize) {
  CUgraphInstantiateResult result;
  if (logBuffer && bufferSize)
    logBuffer[0] = 0;
  if (phErrorNode)
    *phErrorNode = NULL;
  return instantiate(phGraphExec, hGraph, 0, &result);
}

SIM_API CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph,
                                    CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize) {
  return cuGraphInstantiate_v2(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

SIM_API CUresult cuGraphExecGetFlags(CUgraphExec hGraphExec, cuuint64_t *flags) {
  SIM_REQUIRE_INIT();
  struct sim_graph *x = graph_arg(hGraphExec, SIM_EXEC_MAGIC);
  if (!x || !flags)
    return CUDA_ERROR_INVALID_VALUE;
  *flags = x->flags;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  SIM_REQUIRE_INIT();
  struct sim_graph *x = graph_arg(hGraphExec, SIM_EXEC_MAGIC);
  if (!x)
    return CUDA_ERROR_INVALID_VALUE;
  sim_graph_free(x);
  return CUDA_SUCCESS;
}

/* An executable graph and the stream it goes on, both checked, and what the capture rules say
 * of queueing work there (capture.c); sim.mu held on success. */
static CUresult exec_on(CUgraphExec hGraphExec, CUstream h, int ptsz, struct sim_graph **x,
                        struct sim_stream **s) {
  SIM_REQUIRE_INIT();
  if (!(*x = graph_arg(hGraphExec, SIM_EXEC_MAGIC)))
    return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = sim_stream_lock(h, ptsz, s);
  if (rc == CUDA_SUCCESS && (rc = sim_capture_use_locked(*s)) != CUDA_SUCCESS)
    pthread_mutex_unlock(&sim.mu);
  return rc;
}

/* Uploading takes no device time here (nothing is copied to a device); it is checked as
 * stream work is. */
static CUresult graph_upload(CUgraphExec hGraphExec, CUstream h, int ptsz) {
  struct sim_graph *x;
  struct sim_stream *s;
  CUresult rc = exec_on(hGraphExec, h, ptsz, &x, &s);
  if (rc == CUDA_SUCCESS)
    pthread_mutex_unlock(&sim.mu);
  return rc;
}

SIM_TWINS(cuGraphUpload, _ptsz, graph_upload, (CUgraphExec hGraphExec, CUstream hStream),
          hGraphExec, hStream)

static CUresult instantiate_with_params(CUgraphExec *phGraphExec, CUgraph hGraph,
                                        CUDA_GRAPH_INSTANTIATE_PARAMS *p, int ptsz) {
  SIM_REQUIRE_INIT();
  if (!p)
    return CUDA_ERROR_INVALID_VALUE;
  p->hErrNode_out = NULL;
  CUresult rc = instantiate(phGraphExec, hGraph, p->flags, &p->result_out);
  if (rc == CUDA_SUCCESS && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) &&
      (rc = graph_upload(*phGraphExec, p->hUploadStream, ptsz)) != CUDA_SUCCESS) {
    cuGraphExecDestroy(*phGraphExec);
    p->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
  }
  return rc;
}

SIM_TWINS(cuGraphInstantiateWithParams, _ptsz, instantiate_with_params,
          (CUgraphExec * phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *p),
          phGraphExec, hGraph, p)

/* A host node runs on the calling thread once the stream's earlier work is done (as
 * cuLaunchHostFunc does outside a capture, extra.c). s is the stream of that id, unless another
 * thread destroyed it meanwhile: CUDA_ERROR_INVALID_HANDLE if before the node ran. */
static CUresult run_host_node(struct sim_stream *s, unsigned long long id,
                              const struct sim_node *nd) {
  if (sim_stream_relock(s, id) != CUDA_SUCCESS)
    return CUDA_ERROR_INVALID_HANDLE;
  struct sim_mark mk = sim_stream_ready(s);
  int dev = s->ctx->dev;
  pthread_mutex_unlock(&sim.mu);
  sim_mark_wait(dev, &mk);
  nd->fn(nd->data);
  struct sim_mark now = {0, 0, sim_now_ns()};
  if (sim_stream_relock(s, id) == CUDA_SUCCESS) {
    sim_mark_merge(&s->tail, &now);
    pthread_mutex_unlock(&sim.mu);
  }
  return CUDA_SUCCESS;
}

static CUresult run_node(struct sim_stream *s, unsigned long long id, const struct sim_node *nd) {
  /* Copies and memsets move their bytes as the launch reaches them, as async ones do
   * (and, like them, check their ranges under sim.mu themselves). */
  switch (nd->type) {
  case SIM_NODE_KERNEL:
    if (sim_stream_relock(s, id) != CUDA_SUCCESS)
      return CUDA_ERROR_INVALID_HANDLE;
    sim_enqueue_locked(s, nd->dur);
    pthread_mutex_unlock(&sim.mu);
    return CUDA_SUCCESS;
  case SIM_NODE_COPY: return sim_do_copy(nd->dst, nd->src, nd->n, nd->kind);
  case SIM_NODE_MEMSET:
    return sim_do_memset((CUdeviceptr)(uintptr_t)nd->dst, nd->value, nd->elem, nd->n);
  case SIM_NODE_EVENT:
    if (sim_stream_relock(s, id) != CUDA_SUCCESS)
      return CUDA_ERROR_INVALID_HANDLE;
    if (nd->event->magic == SIM_EVENT_MAGIC && nd->event->ctx == s->ctx)
      sim_event_record_locked(nd->event, s);
    pthread_mutex_unlock(&sim.mu);
    return CUDA_SUCCESS;
  case SIM_NODE_HOST: return run_host_node(s, id, nd);
  }
  return CUDA_ERROR_INVALID_VALUE;
}

/* Into a capturing stream the graph becomes part of the capture (a child graph: here its
 * nodes, in order); otherwise its nodes run as a chain on the stream, after the graph's
 * previous launch. */
static CUresult graph_launch(CUgraphExec hGraphExec, CUstream h, int ptsz) {
  struct sim_graph *x;
  struct sim_stream *s;
  CUresult rc = exec_on(hGraphExec, h, ptsz, &x, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (s->cap) {
    for (size_t i = 0; i < x->n && rc == CUDA_SUCCESS; i++)
      rc = sim_capture_add_locked(s, &x->nodes[i]);
    pthread_mutex_unlock(&sim.mu);
    return rc;
  }
  if (x->tail_ctx == s->ctx)
    sim_mark_merge(&s->tail, &x->tail);
  unsigned long long id = s->id;
  pthread_mutex_unlock(&sim.mu);
  /* The stream may be destroyed between nodes (each node takes it again): the rest then is
   * CUDA_ERROR_INVALID_HANDLE, and the graph keeps the tail of its previous launch. */
  for (size_t i = 0; i < x->n && rc == CUDA_SUCCESS; i++)
    rc = run_node(s, id, &x->nodes[i]);
  if (sim_stream_relock(s, id) == CUDA_SUCCESS) {
    x->tail_ctx = s->ctx;
    x->tail = s->tail;
    pthread_mutex_unlock(&sim.mu);
  }
  return rc;
}

SIM_TWINS(cuGraphLaunch, _ptsz, graph_launch, (CUgraphExec hGraphExec, CUstream hStream),
          hGraphExec, hStream)

SIM_API CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                      const CUgraphNode *dependencies, size_t numDependencies,
                                      const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams) {
  if (!nodeParams)
    return CUDA_ERROR_INVALID_VALUE;
  CUDA_KERNEL_NODE_PARAMS p;
  memset(&p, 0, sizeof(p));
  p.func = nodeParams->func;
  p.kernelParams = nodeParams->kernelParams;
  p.extra = nodeParams->extra;
  return cuGraphAddKernelNode_v2(phGraphNode, hGraph, dependencies, numDependencies, &p);
}
