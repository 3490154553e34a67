// Ops over tensor lists recorded as one op (the _foreach_* family, the fused optimizers): one
// exec::OpCall whose lowering handles the lists itself, instead of the composite kernels' loop of
// one op per tensor. Only the plain case is taken: every list on one tpu device with contiguous
// entries, no conjugate or negative bits, and no entry that the per-tensor loop would read after
// an earlier entry's write (two written entries sharing a storage, or an entry read at another
// index than the one written to its storage). The caller checks the rest (dtypes, sizes) and
// runs the composite kernel when a builder call returns false.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

#include <vector>

#include "exec/executor.h"

namespace tpu::aten {

class ListCall {
 public:
  ListCall(const std::string& name, const std::string& overload, const lowering::Entry* entry);

  // Room for the call's tensor operands and written tensors, when known before they are added: a
  // list op's vectors then grow once, not once per list (an optimizer's lists hold hundreds).
  void reserve(size_t tensors, size_t written);

  // Each adds the next argument of the call (in the lowering's order); false: not the plain case.
  bool add_tensor_list(at::TensorList list);
  bool add_number_list(c10::ArrayRef<c10::IValue> scalars);
  // A 0-dim tensor operand: a tpu tensor, or a CPU one, which acts as a number as on CUDA.
  bool add_scalar_tensor(const at::Tensor& t);
  // A tensor operand outside the lists (GradScaler's scale and flags), on the lists' device.
  bool add_tensor(const at::Tensor& t);
  bool add_number(const c10::Scalar& s);
  void add_bool(bool value);
  void add_none();

  // The call's results, in the lowering's order: written into `targets` (in place), or into fresh
  // tensors with `like`'s entries' sizes (rank 0 for a reduction) and dtype (returned).
  void write_into(at::TensorList targets);
  void write_into(const at::Tensor& target);  // a tensor outside the lists
  std::vector<at::Tensor> fresh_results(at::TensorList like, bool rank0);

  // Records or runs the call; false (nothing recorded or run) where the lowering declines it or
  // an entry is read after another entry's write.
  bool run();

 private:
  bool same_device(const at::Tensor& t);
  // Sorts written_.
  bool entries_independent();

  exec::OpCall call_;
  int device_ = -1;
  // Per input and per destination: the list index of the entry (-1: not a list entry) and its
  // storage, to find entries the per-tensor loop would read after another's write.
  using ListEntry = std::pair<int64_t, const void*>;
  std::vector<ListEntry> read_, written_;
};

}  // namespace tpu::aten
