/* SPDX-License-Identifier: Apache-2.0 */
// The CUDA runtime under the hook (libcudart finds every driver entry point through
// cuGetProcAddress): allocates 256 MiB chunks by one path until it fails, then holds them until
// stdin closes. usage: hook_cudart malloc|managed|async|pitch|array|array3d|mipmap
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include <vector>

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "malloc";
  const size_t chunk = 256ull << 20;
  size_t f = 0, t = 0;
  cudaError_t err = cudaMemGetInfo(&f, &t);
  printf("info err=%d free=%zu total=%zu\n", (int)err, f, t);
  cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>();
  std::vector<void *> held;
  int n = 0;
  for (;;) {
    void *p = nullptr;
    if (!strcmp(path, "malloc")) {
      err = cudaMalloc(&p, chunk);
    } else if (!strcmp(path, "managed")) {
      err = cudaMallocManaged(&p, chunk);
    } else if (!strcmp(path, "async")) {
      err = cudaMallocAsync(&p, chunk, 0);
      if (err == cudaSuccess)
        err = cudaStreamSynchronize(0);
    } else if (!strcmp(path, "pitch")) {
      size_t pitch = 0;
      err = cudaMallocPitch(&p, &pitch, 1000, chunk / 1024);
    } else if (!strcmp(path, "array")) {
      cudaArray_t a = nullptr;
      err = cudaMallocArray(&a, &desc, 4096, chunk / 16384);
      p = a;
    } else if (!strcmp(path, "array3d")) {
      cudaArray_t a = nullptr;
      err = cudaMalloc3DArray(&a, &desc, make_cudaExtent(1024, 1024, chunk / (4u << 20)));
      p = a;
    } else if (!strcmp(path, "mipmap")) {
      cudaMipmappedArray_t m = nullptr;
      err = cudaMallocMipmappedArray(&m, &desc, make_cudaExtent(4096, chunk / 16384 * 3 / 4, 0), 4);
      p = m;
    } else {
      fprintf(stderr, "hook_cudart: unknown path %s\n", path);
      return 2;
    }
    if (err != cudaSuccess || ++n > 4096)
      break;
    held.push_back(p);
  }
  cudaGetLastError();
  printf("fill n=%zu err=%d oom=%d\n", held.size(), (int)err, err == cudaErrorMemoryAllocation);
  cudaMemGetInfo(&f, &t);
  printf("info err=0 free=%zu total=%zu\n", f, t);
  printf("waiting\n");
  fflush(stdout);
  while (getchar() != EOF)
    ;
  return 0;
}
