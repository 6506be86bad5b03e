// `lina bench`: training-step time, model-FLOP rate, peak memory and
// inference cost of every preset, measured on this machine in one run.
//
// The parent (run_bench) measures the GEMM rate itself, then runs every
// (preset, job) in a fresh child process — /proc/self/exe with the hidden
// subcommand `bench-worker` — so each peak resident memory is its own, and
// reads back the child's json (run_bench_worker writes it).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/config.h"

namespace lina {

struct BenchShape {
  int batch = 0, context = 0;
};

struct BenchOptions {
  // As given on the command line (comma-separated; "" = the default):
  std::string presets_arg;   // "attn,gdn"
  std::string shapes_arg;    // "64x64,16x256" (batch x context)
  std::string contexts_arg;  // "64,256,1024,4096"
  // Parsed by finish_bench_options:
  std::vector<std::string> presets;      // default: preset_names()
  std::vector<BenchShape> shapes;        // training shapes; default B64×T64, B16×T256
  std::vector<int> contexts;             // inference contexts; default 64, 256, 1024, 4096
  // −1 = the default (normal / --quick): 10 / 3, 2 / 1, 8 / 3.
  int steps = -1;                        // timed training steps per shape
  int warmup = -1;                       // untimed steps before them
  int infer_steps = -1;                  // timed generated tokens per context
  // Rounds over every preset and shape (−1 = the default: 3; --quick 1): the
  // training measurements of different presets interleave, and each row
  // keeps its median round, so a slow minute of a shared machine moves one
  // round of each preset rather than all of one preset's.
  int rounds = -1;
  // --pairs N: each preset's step time over attn's, measured a second way:
  // both models in one process, N pairs of steps that alternate between
  // them (0 = not measured). A busy minute slows the two steps of a pair
  // alike, so the ratio of a pair holds still where whole runs seconds apart
  // do not.
  int pairs = 0;
  int scan_chunk = 0;                    // tokens per chunk of the chunked scan (0 = the config's)
  bool quick = false;
  bool profile = false;
  // --products (implies --profile): every matrix product the profiled steps
  // make, timed again on its own on lina's path and on OpenBLAS's threads.
  bool products = false;
  std::string json;                      // where to write the json ("" = nowhere)
};

// Fills the defaults (and the --quick ones) left empty, checks the rest;
// throws a one-line lina::Error on bad input.
void finish_bench_options(BenchOptions& o);

// Runs everything, prints the tables, writes o.json. Returns the printed text.
std::string run_bench(const BenchOptions& o);

// What one child measures: job "train" (o.shapes[0], o.steps, o.warmup,
// o.profile) or job "infer" (o.contexts, o.infer_steps), for o.presets[0];
// or job "pair" (o.shapes[0], o.warmup, o.pairs): o.presets[1]'s step time
// over o.presets[0]'s, pair by pair.
// Writes its result as json to `out`.
void run_bench_worker(const BenchOptions& o, const std::string& job, const std::string& out);

// Model FLOPs of one training step (forward + backward) of `c` on B×T
// tokens, fixed by the config (see docs/benchmarks.md):
//   per token: 6 × (weights in matrix products: projections, MLP, head;
//              not the embedding)
//            + per attention layer 6 × n_head × head_size × T
//            + per recurrent layer 12 × n_head × head_size²
double model_flops_per_step(const ModelConfig& c, int batch, int context);
// The weights in matrix products per token (the first term's sum).
long long matmul_weights(const ModelConfig& c);

// GEMM rate in GFLOP/s of C = A·B, A M×K, B K×N, float32: through
// dispatch::gemm (lina's path: one block of C per thread, each block on
// OpenBLAS when it is installed, else on Eigen; backend_cpu/openblas.h), the
// same blocks on Eigen when lina's path is OpenBLAS, and OpenBLAS on the
// whole product with its own threads (negative when not measured); lina's
// path and OpenBLAS's threads are timed in alternating pairs.
struct GemmRate {
  int64_t M = 4096, K = 512, N = 2048;
  double lina_gflops = 0, lina_ms = 0;
  std::string lina_path;  // "Eigen" or "OpenBLAS (<core> kernels)"
  double eigen_gflops = -1, eigen_ms = -1;
  double openblas_gflops = -1, openblas_ms = -1;
  // lina's rate over OpenBLAS's: the median over pairs of the two timed one
  // right after the other (alternating which goes first); negative when
  // OpenBLAS is not installed.
  double lina_over_openblas = -1;
  // The CPU kernel set OpenBLAS runs (openblas_get_corename). lina sets
  // OPENBLAS_CORETYPE from the CPU's features unless the environment does
  // (backend_cpu/openblas.h): Debian's OpenBLAS falls back to a slow generic
  // set on CPUs it does not recognise.
  std::string openblas_core;
};
GemmRate measure_gemm(int repeats);

// One matrix product of a training step, as the profile names it
// ("16256x688x128 B^T": M×N×K, the operands read transposed, the batch, +=
// for one added into C), timed on lina's path and on OpenBLAS's own
// threads in alternating pairs (as measure_gemm does).
struct ProductTiming {
  std::string shape;
  double lina_ms = 0, openblas_ms = 0;  // one call, medians
  double lina_over_openblas = 0;        // the pairs' median ratio: > 1, lina's path is faster
};
// Every product of `shapes`, in order; empty unless lina's products run on
// OpenBLAS (there is nothing to compare with otherwise).
std::vector<ProductTiming> measure_products(const std::vector<std::string>& shapes, int repeats);

}  // namespace lina
