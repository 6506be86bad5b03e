// A window of training updates kept in the backend's memory, so that an
// update needs nothing from the host and sends nothing back: on CUDA it can
// be captured once as a graph and replayed (experiments/train.cpp).
//
// Before a window the host draws its batches and works out each update's
// AdamW numbers (as it always did, in the same order) and uploads them in
// one go. Each update then starts with begin(), which copies its row into
// the update's own buffers (x, y, mask and Σ mask, the AdamW numbers), and ends with
// end(), which sums the gradient's squares, logs them with the loss and
// moves the update counter on; a non-finite one refuses that update and the
// rest of the window (the AdamW kernel reads control, and clips with Σ g²).
// After the window one read brings the log back.
// The kernels are begin_update and end_update (core/op_list.h).
#pragma once
#include <array>
#include <vector>

#include "core/tensor.h"
#include "experiments/data.h"

namespace lina {

class UpdatePlan {
 public:
  // Room for up to `window` updates of batch × context tokens (with a mask
  // for recall), in `dtype` on `device`.
  UpdatePlan(int window, int64_t batch, int64_t context, bool masked, DType dtype, Device device);

  // The next window: one host batch and one AdamW row (AdamW::scalars) per
  // update, the first being update `first_update` (0-based).
  void load(const std::vector<Batch>& batches, const std::vector<std::array<double, 3>>& adamw, int first_update);
  int window() const { return window_; }

  // Within an update: begin() fills x, y, mask and scalars; end() forms
  // Σ g² over the gradient buffer `grad` and logs it with the loss.
  void begin();
  void end(const Tensor& loss, const Tensor& grad);
  const Tensor& x() const { return x_; }          // [B, T] token ids
  const Tensor& y() const { return y_; }          // [B, T] targets
  const Tensor& mask() const { return mask_; }    // [B, T], or undefined (lm)
  const Tensor& mask_count() const { return mask_count_; }  // [1] Σ mask, worked out by load(); undefined (lm)
  const Tensor& scalars() const { return scalars_; }  // [3] the AdamW numbers (core/op_list.h)
  const Tensor& control() const { return control_; }  // [3] slot, update, refused_at
  const Tensor& sum_of_squares() const { return sum_of_squares_; }  // [1] float64: this update's Σ g²
  // The update number the dropout masks read (core/philox.h DropoutKey).
  const int32_t* update_counter() const { return control_.data<int32_t>() + 1; }

  // The log of the first `updates` updates of the window: one read back.
  struct Log {
    std::vector<double> loss, sum_of_squares;
  };
  Log read(int updates) const;

 private:
  int window_;
  int64_t tokens_;                                  // B·T
  Tensor ids_table_, mask_table_, scalar_table_;    // [window, 2·B·T] int32, [window, B·T + 1], [window, 3]
  Tensor ids_, x_, y_, scalars_, control_;          // ids_ [2·B·T] = x then y (views)
  Tensor mask_row_, mask_, mask_count_;             // mask_row_ [B·T + 1] = the mask, then Σ mask (views)
  Tensor sum_of_squares_;                           // [1] float64
  Tensor log_;                                      // [window, 2] float64: loss, Σ g²
};

}  // namespace lina
