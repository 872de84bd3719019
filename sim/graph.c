/* SPDX-License-Identifier: Apache-2.0 */
/* Graphs: stream capture, graphs built node by node, instantiation, and replay of an
 * executable graph as a chain on the launch stream (kernels through launch.c). */
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
};

static int graph_add_node(struct sim_graph *g, const struct sim_node *node) {
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

static int graph_add(struct sim_graph *g, uint64_t dur) {
  struct sim_node node = {.type = SIM_NODE_KERNEL, .dur = dur};
  return graph_add_node(g, &node);
}

int sim_capture_add(struct sim_stream *s, const struct sim_node *node) {
  return graph_add_node(s->capture, node);
}

/* Destroyed graphs and executable graphs are recycled, never freed, so destroying one
 * twice is an error (CUDA_ERROR_INVALID_VALUE), not a double free. */
static pthread_mutex_t graph_free_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sim_graph *graph_free_list;

static struct sim_graph *graph_new(void) {
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

static CUresult begin_capture(CUstream h, CUstreamCaptureMode mode, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_stream *s;
  CUresult rc = sim_stream_get(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (s->kind == SIM_STREAM_LEGACY)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  pthread_mutex_lock(&sim.mu);
  if (s->capture)
    rc = CUDA_ERROR_ILLEGAL_STATE;
  else if (!(s->capture = graph_new()))
    rc = CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

SIM_TWINS(cuStreamBeginCapture_v2, _ptsz, begin_capture, (CUstream h, CUstreamCaptureMode mode), h,
          mode)
SIM_TWINS(cuStreamBeginCapture, _ptsz, begin_capture, (CUstream h), h,
          CU_STREAM_CAPTURE_MODE_GLOBAL)

static CUresult end_capture(CUstream h, CUgraph *phGraph, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_stream *s;
  CUresult rc = sim_stream_get(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!phGraph)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&sim.mu);
  if (!s->capture) {
    rc = CUDA_ERROR_ILLEGAL_STATE;
  } else {
    *phGraph = (CUgraph)s->capture;
    s->capture = NULL;
  }
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

SIM_TWINS(cuStreamEndCapture, _ptsz, end_capture, (CUstream h, CUgraph *phGraph), h, phGraph)

static CUresult is_capturing(CUstream h, CUstreamCaptureStatus *status, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_stream *s;
  CUresult rc = sim_stream_get(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!status)
    return CUDA_ERROR_INVALID_VALUE;
  *status = s->capture ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

SIM_TWINS(cuStreamIsCapturing, _ptsz, is_capturing, (CUstream h, CUstreamCaptureStatus *status), h,
          status)

SIM_API CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags) {
  SIM_REQUIRE_INIT();
  if (!phGraph)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_graph *g = graph_new();
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
  if (graph_add(g, sim_kernel_ns(f, nodeParams->kernelParams, nodeParams->extra)) < 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  /* Nodes are run as a chain in the order added: with one kernel at a time on the
   * device, any order the edges allow takes the same device time. */
  *phGraphNode = (CUgraphNode)(uintptr_t)g->n;
  return CUDA_SUCCESS;
}

static CUresult instantiate(CUgraphExec *phGraphExec, CUgraph hGraph) {
  SIM_REQUIRE_INIT();
  struct sim_graph *g = graph_arg(hGraph, SIM_GRAPH_MAGIC);
  if (!g || !phGraphExec)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_graph *x = graph_new();
  if (!x)
    return CUDA_ERROR_OUT_OF_MEMORY;
  x->magic = SIM_EXEC_MAGIC;
  for (size_t i = 0; i < g->n; i++)
    if (graph_add_node(x, &g->nodes[i]) < 0) {
      sim_graph_free(x);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  *phGraphExec = (CUgraphExec)x;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                             unsigned long long flags) {
  return instantiate(phGraphExec, hGraph);
}

SIM_API CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
                                       CUgraphNode *phErrorNode, char *logBuffer,
                                       size_t bufferSize) {
  if (logBuffer && bufferSize)
    logBuffer[0] = 0;
  return instantiate(phGraphExec, hGraph);
}

SIM_API CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph,
                                    CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize) {
  return cuGraphInstantiate_v2(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

SIM_API CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  SIM_REQUIRE_INIT();
  struct sim_graph *x = graph_arg(hGraphExec, SIM_EXEC_MAGIC);
  if (!x)
    return CUDA_ERROR_INVALID_VALUE;
  sim_graph_free(x);
  return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec hGraphExec, CUstream h, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_graph *x = graph_arg(hGraphExec, SIM_EXEC_MAGIC);
  if (!x)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_stream *s;
  CUresult rc = sim_stream_get(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  for (size_t i = 0; i < x->n && rc == CUDA_SUCCESS; i++) {
    const struct sim_node *nd = &x->nodes[i];
    /* Copies and memsets move their bytes as the launch reaches them, as async ones do
     * (and, like them, check their ranges under sim.mu themselves). */
    if (nd->type == SIM_NODE_KERNEL) {
      pthread_mutex_lock(&sim.mu);
      sim_enqueue_locked(s, nd->dur);
      pthread_mutex_unlock(&sim.mu);
    } else if (nd->type == SIM_NODE_COPY) {
      rc = sim_do_copy(nd->dst, nd->src, nd->n, nd->kind);
    } else {
      rc = sim_do_memset((CUdeviceptr)(uintptr_t)nd->dst, nd->value, nd->elem, nd->n);
    }
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
