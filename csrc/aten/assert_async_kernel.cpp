// _assert_async (torch._assert_async, and the asserts torch.export and traced code leave behind,
// as in Llama-style rotary-embedding code): CPU reads the value and raises at once. On tpu that
// read would make every call wait for the device, so the device computes the failure as a flag
// and the next host read raises CPU's error (debug mode: this call), as the indexed ops do.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <string>

#include "aten/device_checks.h"

namespace tpu::aten {
namespace {

void assert_async(const at::Tensor& self, const std::string& message) {
  TORCH_CHECK(self.numel() == 1, "Boolean value of Tensor with more than one value is ambiguous");
  // A zero (false) value fails; NaN is nonzero, as in CPU's check.
  note_device_check(self.reshape({}).eq(0), "aten::_assert_async", message);
}

void assert_async_default(const at::Tensor& self) {
  assert_async(self, "Expected Tensor with single nonzero value, but got zero");
}

void assert_async_message(const at::Tensor& self, c10::string_view assert_msg) {
  assert_async(self, std::string(assert_msg));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_assert_async", TORCH_FN(assert_async_default));
  m.impl("_assert_async.msg", TORCH_FN(assert_async_message));
}

}  // namespace
}  // namespace tpu::aten
