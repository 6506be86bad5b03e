// Stream capture and CUDA graphs.
//
// Between cudaStreamBeginCapture and cudaStreamEndCapture a stream's work is
// recorded instead of queued: each kernel launch (its arguments as copied at
// the launch), cuBLAS call, cudaMemcpyAsync and cudaMemsetAsync becomes a
// node of the graph, in the stream's order, and nothing of it runs. A
// launch of the instantiated graph checks every node's device memory again
// (still allocated) and then queues the nodes in order, as if they had been
// submitted one by one; they run at the next synchronisation.
//
// What would wait for the device, or needs memory a graph would have to own,
// is refused while a capture is active (see CaptureRule in runtime.h), and
// the refusal invalidates the capture: its cudaStreamEndCapture then returns
// cudaErrorStreamCaptureInvalidated, no graph, and the stream is no longer
// capturing.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cuda_sim/runtime.h"

struct CUgraphNode_st {
  cuda_sim::Work work;
};
struct CUgraph_st {
  std::vector<std::unique_ptr<CUgraphNode_st>> nodes;
};
struct CUgraphExec_st {  // independent of its graph, which may be destroyed first
  std::vector<cuda_sim::Work> nodes;
};

namespace cuda_sim {

namespace {

struct Capture {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::unique_ptr<CUgraph_st> graph = std::make_unique<CUgraph_st>();
  std::string invalidated_by;  // the first refused call; empty while the capture is valid
};

std::map<CUstream_st*, Capture>& captures() {  // the streams capturing now
  static auto* m = new std::map<CUstream_st*, Capture>();
  return *m;
}

std::string stream_name(CUstream_st* stream) {
  return stream == nullptr ? "the default stream" : "stream " + std::to_string(stream->id);
}

bool rule_concerns(CaptureRule rule, CUstream_st* call_stream, CUstream_st* capturing_stream,
                   const Capture& capture) {
  switch (rule) {
    case CaptureRule::WaitsForDevice: return true;
    case CaptureRule::UnsafeInGlobalMode: return capture.mode != cudaStreamCaptureModeRelaxed;
    case CaptureRule::OnCapturingStream: return call_stream == capturing_stream;
  }
  return true;
}

const char* rule_reason(CaptureRule rule) {
  switch (rule) {
    case CaptureRule::WaitsForDevice:
      return "it waits for the device, and captured work is recorded, not run";
    case CaptureRule::UnsafeInGlobalMode:
      return "not permitted during a capture begun in global or thread-local mode";
    case CaptureRule::OnCapturingStream:
      return "not permitted on a capturing stream";
  }
  return "";
}

cudaError_t fail(cudaError_t err, const std::string& detail) {
  set_launch_error(err, detail);
  return err;
}

const char* node_type_name(cudaGraphNodeType type) {
  switch (type) {
    case cudaGraphNodeTypeKernel: return "kernel";
    case cudaGraphNodeTypeMemcpy: return "memcpy";
    case cudaGraphNodeTypeMemset: return "memset";
    case cudaGraphNodeTypeEventRecord: return "event record";
  }
  return "node";
}

// Every node's device memory is still allocated; else the error, naming the node.
cudaError_t check_nodes(const CUgraphExec_st& exec) {
  for (size_t i = 0; i < exec.nodes.size(); ++i) {
    const Work& node = exec.nodes[i];
    if (!node.check) continue;
    if (cudaError_t err = node.check()) {
      const std::string why = cudaGetErrorString(err);
      return fail(err, "cudaGraphLaunch, node " + std::to_string(i) + " (" + node_type_name(node.type) +
                           "): " + why);
    }
  }
  return cudaSuccess;
}

}  // namespace

bool capturing(CUstream_st* stream) { return stream != nullptr && captures().count(stream) != 0; }

void record(CUstream_st* stream, Work work) {
  Capture& capture = captures().at(stream);
  if (!capture.invalidated_by.empty()) return;  // its graph will never be returned
  capture.graph->nodes.push_back(std::make_unique<CUgraphNode_st>(CUgraphNode_st{std::move(work)}));
}

cudaError_t refuse_during_capture(CaptureRule rule, CUstream_st* stream, const std::string& call) {
  std::string invalidated;
  for (auto& [capturing_stream, capture] : captures()) {
    if (!rule_concerns(rule, stream, capturing_stream, capture)) continue;
    if (capture.invalidated_by.empty()) capture.invalidated_by = call;
    capture.graph->nodes.clear();
    invalidated += (invalidated.empty() ? "" : ", ") + stream_name(capturing_stream);
  }
  if (invalidated.empty()) return cudaSuccess;
  return fail(cudaErrorStreamCaptureUnsupported,
              call + " while " + invalidated + " is capturing: " + rule_reason(rule) +
                  "; the capture is invalidated (cudaStreamEndCapture returns cudaErrorStreamCaptureInvalidated)");
}

void end_all_captures() { captures().clear(); }

}  // namespace cuda_sim

using namespace cuda_sim;

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (cudaError_t err = sticky_error()) return err;
  if (stream == nullptr)
    return fail(cudaErrorStreamCaptureUnsupported, "cudaStreamBeginCapture: the default stream cannot be captured");
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
      mode != cudaStreamCaptureModeRelaxed)
    return fail(cudaErrorInvalidValue, "cudaStreamBeginCapture: unknown capture mode " + std::to_string(int(mode)));
  if (capturing(stream))
    return fail(cudaErrorIllegalState, "cudaStreamBeginCapture: " + stream_name(stream) + " is already capturing");
  captures()[stream].mode = mode;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* pGraph) {
  if (pGraph == nullptr) return cudaErrorInvalidValue;
  *pGraph = nullptr;
  auto it = captures().find(stream);
  if (it == captures().end())
    return fail(cudaErrorIllegalState, "cudaStreamEndCapture: " + stream_name(stream) + " is not capturing");
  Capture capture = std::move(it->second);
  captures().erase(it);
  if (!capture.invalidated_by.empty())
    return fail(cudaErrorStreamCaptureInvalidated, "cudaStreamEndCapture: the capture on " + stream_name(stream) +
                                                       " was invalidated by " + capture.invalidated_by);
  *pGraph = capture.graph.release();
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* pCaptureStatus) {
  if (pCaptureStatus == nullptr) return cudaErrorInvalidValue;
  auto it = captures().find(stream);
  *pCaptureStatus = it == captures().end()            ? cudaStreamCaptureStatusNone
                    : it->second.invalidated_by.empty() ? cudaStreamCaptureStatusActive
                                                        : cudaStreamCaptureStatusInvalidated;
  return cudaSuccess;
}

// With nodes null: their count. Else up to *numNodes of them (the rest of
// the array null) and the count written.
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* numNodes) {
  if (graph == nullptr || numNodes == nullptr) return cudaErrorInvalidValue;
  const size_t count = graph->nodes.size();
  if (nodes == nullptr) {
    *numNodes = count;
    return cudaSuccess;
  }
  for (size_t i = 0; i < *numNodes; ++i) nodes[i] = i < count ? graph->nodes[i].get() : nullptr;
  if (*numNodes > count) *numNodes = count;
  return cudaSuccess;
}

cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, cudaGraphNodeType* pType) {
  if (node == nullptr || pType == nullptr) return cudaErrorInvalidValue;
  *pType = node->work.type;
  return cudaSuccess;
}

// flags (auto-free on launch, upload, …) change nothing here: a graph holds no memory of its own.
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* pGraphExec, cudaGraph_t graph, unsigned long long) {
  if (pGraphExec == nullptr || graph == nullptr) return cudaErrorInvalidValue;
  auto* exec = new CUgraphExec_st();
  for (const auto& node : graph->nodes) exec->nodes.push_back(node->work);
  *pGraphExec = exec;
  return cudaSuccess;
}

// Launched into a capturing stream, the graph's nodes are recorded into that capture.
cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
  if (graphExec == nullptr) return fail(cudaErrorInvalidValue, "cudaGraphLaunch: a null graph");
  if (cudaError_t err = sticky_error()) return err;
  if (cudaError_t err = check_nodes(*graphExec)) return err;
  if (!capturing(stream)) count_graph_launch();
  for (const Work& node : graphExec->nodes) submit(stream, node);
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
  delete graphExec;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}
