// One training update recorded once as a CUDA graph and replayed, and the
// memory that graph owns.
//
// A graph holds raw device pointers: every buffer its kernels touch must
// stay where it was at the capture, for as long as the graph lives, and
// must not be handed to anyone else in between. The update's short-lived
// tensors therefore come from graph memory, a set of blocks kept apart from
// the stream-ordered pool and never given back:
//   1. rehearsal: one update runs eagerly with every allocation taken from
//      graph memory, which grows (cudaMalloc) when no free block has the
//      exact size asked for; a freed block goes back to graph memory;
//   2. capture: the same update is recorded. It asks for the same sizes in
//      the same order, so each one finds a free block, and graph memory
//      must not grow: a capture cannot allocate (nothing runs), and an
//      allocation outside graph memory is an error that names it.
// Outside those two, allocations go to the pool as always (memory.cu).
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backend_cuda/cuda_context.h"
#include "backend_cuda/cuda_kernels.h"
#include "core/error.h"

struct lina::cuda::Graph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  int64_t kernels = 0;  // kernel nodes (cuBLAS calls included where they are kernels)
};

namespace lina::cuda {

namespace {

enum class GraphMemoryMode { Off, Grow, Fixed };

struct GraphMemory {
  GraphMemoryMode mode = GraphMemoryMode::Off;
  std::multimap<size_t, void*> free_blocks;  // by size
  std::map<void*, size_t> owned;             // every block, with its size
};

GraphMemory& graph_memory() {
  static auto* memory = new GraphMemory();  // never destroyed, like the context
  return *memory;
}

}  // namespace

bool graph_memory_serves() { return graph_memory().mode != GraphMemoryMode::Off; }

void* graph_memory_alloc(size_t bytes) {
  GraphMemory& gm = graph_memory();
  auto it = gm.free_blocks.find(bytes);
  if (it != gm.free_blocks.end()) {
    void* ptr = it->second;
    gm.free_blocks.erase(it);
    return ptr;
  }
  if (gm.mode == GraphMemoryMode::Fixed)
    throw Error("cuda graph: an allocation of " + std::to_string(bytes) +
                " bytes during the capture that its rehearsal did not make: the captured update must "
                "allocate what the rehearsed one did, in the same order");
  void* ptr = nullptr;
  LINA_CUDA_CHECK(cudaMalloc(&ptr, bytes), "cuda graph memory: " + std::to_string(bytes) + " bytes");
  gm.owned[ptr] = bytes;
  return ptr;
}

bool graph_memory_release(void* ptr) {
  GraphMemory& gm = graph_memory();
  auto it = gm.owned.find(ptr);
  if (it == gm.owned.end()) return false;
  gm.free_blocks.emplace(it->second, ptr);
  return true;
}

void begin_graph_rehearsal() { graph_memory().mode = GraphMemoryMode::Grow; }
void end_graph_rehearsal() { graph_memory().mode = GraphMemoryMode::Off; }

void begin_capture() {
  Context& ctx = context();
  if (ctx.sync_after_launch)
    throw Error("LINA_CUDA_SYNC=1 waits for the device after every launch, which a CUDA graph's capture cannot: "
                "add --cuda-graph off");
  LINA_CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeGlobal), "cuda graph: begin capture");
  graph_memory().mode = GraphMemoryMode::Fixed;
}

// Ends the capture even when the work between failed, so that the stream
// is usable again, and then reports why the capture is no good.
Graph* end_capture() {
  Context& ctx = context();
  graph_memory().mode = GraphMemoryMode::Off;
  auto* g = new Graph();
  const cudaError_t ended = cudaStreamEndCapture(ctx.stream, &g->graph);
  if (ended != cudaSuccess) {
    delete g;
    LINA_CUDA_CHECK(ended, "cuda graph: the capture (a call during it was refused; see above)");
  }
  size_t count = 0;
  LINA_CUDA_CHECK(cudaGraphGetNodes(g->graph, nullptr, &count), "cuda graph: counting nodes");
  std::vector<cudaGraphNode_t> nodes(count);
  LINA_CUDA_CHECK(cudaGraphGetNodes(g->graph, nodes.data(), &count), "cuda graph: listing nodes");
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    LINA_CUDA_CHECK(cudaGraphNodeGetType(node, &type), "cuda graph: node type");
    g->kernels += type == cudaGraphNodeTypeKernel;
  }
  LINA_CUDA_CHECK(cudaGraphInstantiate(&g->exec, g->graph, 0), "cuda graph: instantiate");
  return g;
}

void launch_graph(Graph* g) {
  count_graph_launch();
  LINA_CUDA_CHECK(cudaGraphLaunch(g->exec, context().stream), "cuda graph: launch");
  if (context().sync_after_launch)
    LINA_CUDA_CHECK(cudaStreamSynchronize(context().stream), "cuda graph: launch (LINA_CUDA_SYNC=1)");
}

int64_t graph_kernels(const Graph* g) { return g->kernels; }

void destroy_graph(Graph* g) {
  if (g == nullptr) return;
  if (g->exec) cudaGraphExecDestroy(g->exec);
  if (g->graph) cudaGraphDestroy(g->graph);
  delete g;
}

}  // namespace lina::cuda
